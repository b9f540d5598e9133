from core.routers import OptionalSlashRouter
from displays.api import DisplayViewSet, PanelViewSet

router = OptionalSlashRouter()
router.register("displays", DisplayViewSet)
router.register("panels", PanelViewSet)

urlpatterns = router.urls
