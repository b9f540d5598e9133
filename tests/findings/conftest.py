"""A small recorded site for the findings tests: a zone with a schedule, its valve and
temperature feed, a heating plant with its boiler, and a gas tariff."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

MONDAY = datetime(2030, 1, 7, tzinfo=UTC)  # January: the site's local time is UTC
WEEK = timedelta(days=7)


@pytest.fixture(autouse=True)
def after_the_recorded_weeks(monkeypatch):
    """The recorded weeks lie in 2030: the evaluator's clock is set after them, as it would be
    when they are judged (it never judges hours that have not happened)."""
    from findings import evaluate, evidence

    for module in (evaluate, evidence):
        monkeypatch.setattr(module, "clock", lambda: datetime(2031, 1, 1, tzinfo=UTC))


GAS_PRICE = 0.07  # £/kWh


@pytest.fixture
def site_model(db, redis_client):
    from control.models import HeatingPlant, Schedule, SchedulePeriod, Zone
    from energy.models import FuelRate
    from feeds.models import Feed
    from sensors.models import Actuator, Node, Sensor, Site

    site = Site.objects.create(name="CAT", slug="cat")
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=GAS_PRICE)
    node = Node(name="roomnode", site=site)
    node.set_new_key()
    node.save()
    feed = Feed.objects.create(name="Hall temperature", tag="t", unit="°C", interval=60)
    sensor = Sensor.objects.create(
        node=node, key="hall_t", name="Hall thermometer", kind="temperature", feed=feed
    )
    schedule = Schedule.objects.create(name="Office", site=site)
    for day in range(5):
        SchedulePeriod.objects.create(schedule=schedule, weekday=day, start=time(8), end=time(17))
    valve = Actuator.objects.create(name="Hall valve", kind="valve", site=site, coil=1)
    zone = Zone.objects.create(
        name="Hall", slug="hall", site=site, schedule=schedule, temperature_sensor=sensor,
        optimum_start=False,
    )  # fmt: skip
    zone.actuators.set([valve])
    boiler = Actuator.objects.create(name="Boiler 1", kind="boiler", site=site, coil=2)
    plant = HeatingPlant.objects.create(name="Plant room", boiler=boiler, site=site)
    plant.zones.set([zone])
    return {"site": site, "zone": zone, "valve": valve, "boiler": boiler, "plant": plant,
            "feed": feed, "sensor": sensor}  # fmt: skip


def command(actuator, at: datetime, state: bool, strategy: str = "schedule", error: str = ""):
    from control.models import ActuatorCommand

    return ActuatorCommand.objects.create(
        actuator=actuator, state=state, strategy=strategy, reason=f"test {strategy}",
        requested_at=at, sent_at=at, confirmed_at=None if error else at, error=error,
    )  # fmt: skip


def record(feed_id: int, start: datetime, hours: float, value_at, step_min: int = 5) -> None:
    """A temperature feed recorded every `step_min` minutes: value_at(minutes from start)."""
    from feeds.store import service as feed_service

    points = []
    for i in range(int(hours * 60 / step_min)):
        t = start + timedelta(minutes=i * step_min)
        points.append((feed_id, int(t.timestamp()), value_at(i * step_min)))
    feed_service.log_points(points)
