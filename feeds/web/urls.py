"""emoncms-compatible feed paths (reads): graphs, apps, backup and sync scripts written for
emoncms work (docs/FEEDS.md)."""

from django.urls import path

from feeds.web import emoncms_feed_views as more
from feeds.web import views

urlpatterns = [
    path("feed/list.json", views.FeedList.as_view(), name="feed-list-json"),
    path("feed/timevalue.json", views.TimeValue.as_view(), name="feed-timevalue-json"),
    path("feed/data.json", views.Data.as_view(), name="feed-data-json"),
    path("feed/csvexport.json", views.CsvExport.as_view(), name="feed-csvexport-json"),
    path("feed/value.json", views.Value.as_view(), name="feed-value-json"),
    path("feed/fetch.json", views.Fetch.as_view(), name="feed-fetch-json"),
    path("feed/export.json", views.Export.as_view(), name="feed-export-json"),
    path("feed/average.json", views.Average.as_view(), name="feed-average-json"),
    path("feed/getmeta.json", more.GetMeta.as_view(), name="feed-getmeta-json"),
    path("feed/get.json", more.GetField.as_view(), name="feed-get-json"),
    path("feed/aget.json", more.AGet.as_view(), name="feed-aget-json"),
    path("feed/buffersize.json", more.BufferSize.as_view(), name="feed-buffersize-json"),
    path("feed/create.json", more.Create.as_view(), name="feed-create-json"),
    path("feed/insert.json", more.Insert.as_view(), name="feed-insert-json"),
    path("feed/post.json", more.Insert.as_view(), name="feed-post-json"),
]
