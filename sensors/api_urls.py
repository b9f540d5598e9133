from django.urls import path, re_path

from core.routers import OptionalSlashRouter
from sensors.api import (
    ActuatorViewSet,
    BacnetDeviceViewSet,
    BacnetPointViewSet,
    ModbusBusViewSet,
    ModbusRegisterMapViewSet,
    ModbusRegisterViewSet,
    NodeViewSet,
    SensorViewSet,
    SiteViewSet,
)
from sensors.aside_api import SetAsideDiscard, SetAsideList, SetAsideRetry
from sensors.ingest import views as ingest_views

router = OptionalSlashRouter()
router.register("sites", SiteViewSet)
router.register("nodes", NodeViewSet)
router.register("sensors", SensorViewSet)
router.register("modbus-registers", ModbusRegisterViewSet)
router.register("modbus-buses", ModbusBusViewSet)
router.register("modbus-register-maps", ModbusRegisterMapViewSet, basename="modbus-register-map")
router.register("actuators", ActuatorViewSet)
router.register("bacnet-devices", BacnetDeviceViewSet)
router.register("bacnet-points", BacnetPointViewSet)

# Node ingest before the router, so it is never taken for a viewset route.
urlpatterns = [
    re_path(r"^readings/?$", ingest_views.readings, name="readings"),
    path("set-aside", SetAsideList.as_view(), name="set-aside"),
    path(
        "set-aside/<int:node_pk>/<str:entry>/retry", SetAsideRetry.as_view(), name="set-aside-retry"
    ),
    path(
        "set-aside/<int:node_pk>/<str:entry>/discard",
        SetAsideDiscard.as_view(),
        name="set-aside-discard",
    ),
    *router.urls,
]
