from django.urls import path

from core.routers import OptionalSlashRouter
from feeds.web import data_api
from feeds.web.api import FeedViewSet

router = OptionalSlashRouter()
router.register("feeds", FeedViewSet)

# Data paths first: the router's feeds/<pk> would otherwise take "feeds/data".
urlpatterns = [
    path("feeds/data", data_api.FeedsData.as_view(), name="feeds-data-many"),
    path("feeds/<int:pk>/data", data_api.FeedData.as_view(), name="feeds-data"),
    path("feeds/<int:pk>/timevalue", data_api.FeedTimeValue.as_view(), name="feeds-timevalue"),
    *router.urls,
]
