from django.urls import path

from core.routers import OptionalSlashRouter
from energy.api import (
    EnergySiteViewSet,
    ExpectedUseViewSet,
    FuelRateViewSet,
    GridCarbonPeriodViewSet,
    LeagueView,
    MeterNodeViewSet,
    MeterViewSet,
    RefreshView,
    ReportRecipientViewSet,
)

router = OptionalSlashRouter()
router.register("energy/nodes", MeterNodeViewSet)
router.register("energy/meters", MeterViewSet)
router.register("energy/expected", ExpectedUseViewSet)
router.register("energy/fuel-rates", FuelRateViewSet)
router.register("energy/sites", EnergySiteViewSet)
router.register("energy/grid-carbon", GridCarbonPeriodViewSet)
router.register("energy/report-recipients", ReportRecipientViewSet)

urlpatterns = router.urls + [
    path("energy/league", LeagueView.as_view(), name="energy-league"),
    path("energy/refresh", RefreshView.as_view(), name="energy-refresh"),
]
