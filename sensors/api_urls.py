from bms.routers import OptionalSlashRouter
from sensors.api import (
    ActuatorViewSet,
    AlarmViewSet,
    ModbusRegisterViewSet,
    NodeViewSet,
    SensorViewSet,
    SiteViewSet,
)

router = OptionalSlashRouter()
router.register("sites", SiteViewSet)
router.register("nodes", NodeViewSet)
router.register("sensors", SensorViewSet)
router.register("modbus-registers", ModbusRegisterViewSet)
router.register("actuators", ActuatorViewSet)
router.register("alarms", AlarmViewSet)

urlpatterns = router.urls
