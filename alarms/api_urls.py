from alarms.api import AlarmViewSet
from core.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("alarms", AlarmViewSet)

urlpatterns = router.urls
