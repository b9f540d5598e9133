"""Database objects for control tests: a zone with a temperature feed and relay actuators."""

from __future__ import annotations

import time

from control.models import Zone
from feeds.models import Feed
from feeds.store import service as feed_service
from sensors.models import Actuator, Node, Sensor


def node(name: str = "roomnode") -> tuple[Node, str]:
    n = Node(name=name)
    key = n.set_new_key()
    n.save()
    return n, key


def temperature_sensor(name: str) -> Sensor:
    n = Node.objects.filter(name="roomnode").first() or node()[0]
    feed = Feed.objects.create(name=f"{name} temperature", tag="test", unit="°C", interval=10)
    return Sensor.objects.create(node=n, key=f"{name}-t", kind="temperature", feed=feed)


def set_temperature(zone: Zone, value: float, t: float | None = None) -> None:
    feed_service.log_points([(zone.temperature_sensor.feed_id, int(t or time.time()), value)])


def relay(name: str, board, coil: int, kind: str = "valve", **kw) -> Actuator:
    defaults = {"min_on_s": 0, "min_off_s": 0}
    defaults.update(kw)
    return Actuator.objects.create(
        name=name, kind=kind, host=board.host, port=board.port, coil=coil, **defaults
    )


def zone(name: str, *actuators: Actuator, temp: float | None = None, **kw) -> Zone:
    sensor = temperature_sensor(name)
    z = Zone.objects.create(
        name=name, slug=name.lower().replace(" ", "-"), temperature_sensor=sensor, **kw
    )
    z.actuators.set(actuators)
    if temp is not None:
        set_temperature(z, temp)
    return z
