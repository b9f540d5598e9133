from core.routers import OptionalSlashRouter
from findings.api import FindingViewSet

router = OptionalSlashRouter()
router.register("findings", FindingViewSet)

urlpatterns = router.urls
