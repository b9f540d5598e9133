from django.urls import path

from control import node_api
from control.api import (
    ActuatorCommandViewSet,
    AnalogueCommandViewSet,
    BookingViewSet,
    HeatingPlantViewSet,
    HeatMainViewSet,
    HeatSourceViewSet,
    OutputOverrideViewSet,
    OverrideViewSet,
    RelayBoardViewSet,
    ScheduleExceptionViewSet,
    SchedulePeriodViewSet,
    ScheduleViewSet,
    SolarCircuitViewSet,
    ThermalStoreViewSet,
    WeatherCompensationViewSet,
    ZoneViewSet,
)
from control.status_api import ControlStatusView
from core.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("zones", ZoneViewSet)
router.register("schedules", ScheduleViewSet)
router.register("schedule-periods", SchedulePeriodViewSet)
router.register("schedule-exceptions", ScheduleExceptionViewSet)
router.register("bookings", BookingViewSet)
router.register("overrides", OverrideViewSet)
router.register("actuator-commands", ActuatorCommandViewSet)
router.register("weather-compensations", WeatherCompensationViewSet)
router.register("relay-boards", RelayBoardViewSet)
router.register("heating-plants", HeatingPlantViewSet)
router.register("solar-circuits", SolarCircuitViewSet)
router.register("heat-mains", HeatMainViewSet)
router.register("heat-sources", HeatSourceViewSet)
router.register("thermal-stores", ThermalStoreViewSet)
router.register("analogue-commands", AnalogueCommandViewSet)
router.register("output-overrides", OutputOverrideViewSet)

urlpatterns = router.urls + [
    # Node command queue (node key auth): control/node_api.py
    path("nodes/<int:node_id>/commands", node_api.commands, name="node-commands"),
    path("nodes/<int:node_id>/commands/", node_api.commands),
    path(
        "nodes/<int:node_id>/commands/<int:command_id>/ack",
        node_api.acknowledge,
        name="node-command-ack",
    ),
    path("nodes/<int:node_id>/commands/<int:command_id>/ack/", node_api.acknowledge),
    path("control/status", ControlStatusView.as_view(), name="control-status"),
]
