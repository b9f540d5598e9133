"""The demo site's configuration of its legacy BACnet controller (demo/bacnet_controller.py),
as an engineer would make it with `manage.py bacnet add`: a controller polled every 10 s whose
flow temperature (analog-input,1) is recorded into a feed of its own. When the controller is
off (its port taken) its node is disabled, so it is not polled and not alarmed."""

from __future__ import annotations

from demo.bacnet_controller import DEMO_INSTANCE, DEMO_NODE
from feeds.models import Feed
from sensors.devices.bacnet_client import ObjectInfo
from sensors.devices.bacnet_devices import add_device, map_points
from sensors.models import BacnetDevice, Site

POLL_INTERVAL_S = 10
FLOW = ObjectInfo(
    "analog-input", 1, "Boiler flow temperature", "degrees-celsius", "Flow sensor after the boiler"
)
FEED_NAME = "Boiler flow temperature (BACnet)"


def ensure_demo_bacnet(site: Site, host: str, port: int, *, running: bool = True) -> BacnetDevice:
    """The controller at host:port, its flow mapped to a feed; its node disabled when the
    controller is not running (the configuration is there all the same, as on a real site)."""
    device = add_device(
        DEMO_NODE, f"{host}:{port}", DEMO_INSTANCE, interval=POLL_INTERVAL_S,
        vendor_name="Demo legacy BMS",
    )  # fmt: skip
    node = device.node
    if (node.site_id, node.enabled) != (site.pk, running):
        node.site, node.enabled = site, running
        node.save(update_fields=["site", "enabled"])
    map_points(device, [FLOW])
    sensor = node.sensors.get(key="analog-input-1")
    if sensor.feed_id is None:
        feed, _ = Feed.objects.get_or_create(
            tag=DEMO_NODE, name=FEED_NAME, defaults={"unit": "°C", "interval": POLL_INTERVAL_S}
        )
        sensor.feed = feed
        sensor.processes = [{"process": "log_to_feed", "feed": feed.pk}]
        sensor.save(update_fields=["feed", "processes"])
    return device
