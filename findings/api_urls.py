from django.urls import path

from core.routers import OptionalSlashRouter
from findings.api import BrickModelView, FindingViewSet

router = OptionalSlashRouter()
router.register("findings", FindingViewSet)

urlpatterns = router.urls + [path("brick.ttl", BrickModelView.as_view(), name="brick-model")]
