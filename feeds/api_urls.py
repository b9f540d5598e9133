from bms.routers import OptionalSlashRouter
from feeds.api import FeedViewSet

router = OptionalSlashRouter()
router.register("feeds", FeedViewSet)

urlpatterns = router.urls
