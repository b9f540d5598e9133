from bms.routers import OptionalSlashRouter

router = OptionalSlashRouter()

urlpatterns = router.urls
