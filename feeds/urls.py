"""emoncms-compatible feed paths (reads): graphs and scripts written for emoncms work."""

from django.urls import path

from feeds import views

urlpatterns = [
    path("feed/list.json", views.FeedList.as_view(), name="feed-list-json"),
    path("feed/timevalue.json", views.TimeValue.as_view(), name="feed-timevalue-json"),
    path("feed/data.json", views.Data.as_view(), name="feed-data-json"),
]
