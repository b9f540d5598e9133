from bms.routers import OptionalSlashRouter
from control.api import (
    ActuatorCommandViewSet,
    BookingViewSet,
    OverrideViewSet,
    ScheduleExceptionViewSet,
    SchedulePeriodViewSet,
    ScheduleViewSet,
    ZoneViewSet,
)

router = OptionalSlashRouter()
router.register("zones", ZoneViewSet)
router.register("schedules", ScheduleViewSet)
router.register("schedule-periods", SchedulePeriodViewSet)
router.register("schedule-exceptions", ScheduleExceptionViewSet)
router.register("bookings", BookingViewSet)
router.register("overrides", OverrideViewSet)
router.register("actuator-commands", ActuatorCommandViewSet)

urlpatterns = router.urls
