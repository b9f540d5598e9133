"""A small world for the security tests: two nodes with keys, private and public things, one
user per role. Names of private objects contain HIDDEN so a refused answer can be checked for
leaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, time, timedelta

import pytest
from django.utils import timezone

HIDDEN = "HIDDEN"


@dataclass
class World:
    ids: dict[str, int] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    slugs: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def world(db, redis_client, engineer, booker, viewer, superuser) -> World:
    from alarms.models import Alarm
    from control.models import (
        ActuatorCommand,
        Booking,
        HeatingPlant,
        NodeCommand,
        Override,
        Schedule,
        ScheduleException,
        SchedulePeriod,
        SolarCircuit,
        Zone,
    )  # fmt: skip
    from displays.models import Display, Panel
    from energy.models import (
        EnergySite,
        ExpectedUse,
        FuelRate,
        GridCarbonPeriod,
        Meter,
        MeterNode,
        ReportRecipient,
    )
    from feeds.models import Feed
    from sensors import cache
    from sensors.models import (
        Actuator,
        BacnetDevice,
        ModbusBus,
        ModbusRegister,
        Node,
        Sensor,
        Site,
    )

    cache.clear_all()
    w = World()
    site = Site.objects.create(name=f"{HIDDEN} site", slug="hidden-site")
    for name, radio in (("node-a", 40), ("node-b", 41)):
        node = Node(name=name, node_id=radio, site=site)
        w.keys[name] = node.set_new_key()
        node.save()
        w.ids[name] = node.pk
    node_a = Node.objects.get(name="node-a")
    from sensors.ingest import set_aside  # a request the drain set aside, for its pages

    for entry in ("1700000000000-0", "1700000001000-0"):  # two: each writer retries one
        set_aside.move_aside(
            redis_client, node_a.pk, [entry], [[1_700_000_000, {"p": 1.0}]],
            RuntimeError(f"{HIDDEN} error"),
        )  # fmt: skip
    w.slugs["aside"] = redis_client.xrange(set_aside.ASIDE_PREFIX + str(node_a.pk))[0][0].decode()
    private = Feed.objects.create(name=f"{HIDDEN} feed", tag="t", interval=10)
    public = Feed.objects.create(name="public pv", tag="t", interval=10, public=True)
    sensor = Sensor.objects.create(node=node_a, key="hidden_power", feed=private)
    register = ModbusRegister.objects.create(node=node_a, key="kwh", address=10)
    bus = ModbusBus.objects.create(name=f"{HIDDEN} bus", port="/dev/ttyUSB9")
    actuator = Actuator.objects.create(name=f"{HIDDEN} valve")
    alarm = Alarm.objects.create(key="hidden:alarm", source="test", message=f"{HIDDEN} alarm")
    zone = Zone.objects.create(name=f"{HIDDEN} zone", slug="hidden-zone")
    schedule = Schedule.objects.create(name=f"{HIDDEN} schedule")
    period = SchedulePeriod.objects.create(
        schedule=schedule, weekday=0, start=time(8), end=time(17), setpoint=20
    )
    exception = ScheduleException.objects.create(schedule=schedule, date=date(2031, 1, 1))
    start = timezone.now() + timedelta(days=2)
    booking = Booking.objects.create(
        zone=zone, title=f"{HIDDEN} booking", start=start, end=start + timedelta(hours=1)
    )
    override = Override.objects.create(
        actuator=actuator, state=True, expires=start, reason=f"{HIDDEN} override"
    )
    command = ActuatorCommand.objects.create(actuator=actuator, state=True, reason=HIDDEN)
    node_command = NodeCommand.objects.create(node=node_a, actuator=actuator, state=True)
    private_display = Display.objects.create(slug="hidden-display", title=HIDDEN, public=False)
    public_display = Display.objects.create(slug="pv", title="PV", public=True)
    panel = Panel.objects.create(display=private_display, kind="live_value", label=HIDDEN)
    energy_site = EnergySite.objects.create(site=site, outside_temperature_feed=private)
    building = MeterNode.objects.create(
        site=site, name=f"{HIDDEN} building", kind=MeterNode.Kind.BUILDING, floor_area_m2=1000
    )
    meter = Meter.objects.create(
        node=building, name=f"{HIDDEN} meter", fuel="electricity", source="cumulative", feed=private
    )
    expected = ExpectedUse.objects.create(
        node=building, fuel="electricity", start=date(2031, 1, 1), end=date(2031, 1, 31), value=9
    )
    fuel_rate = FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=0.25)
    grid_carbon = GridCarbonPeriod.objects.create(
        site=site, start=date(2031, 1, 1), end=date(2031, 12, 31), g_per_kwh=150
    )
    recipient = ReportRecipient.objects.create(site=site, email="hidden@example.org")
    w.ids.update(grid_carbon=grid_carbon.pk, recipient=recipient.pk)
    bacnet_node = Node(name="boiler-house", protocol=Node.Protocol.BACNET, site=site)
    bacnet_node.set_new_key()
    bacnet_node.save()
    bacnet = BacnetDevice.objects.create(
        node=bacnet_node, address="192.0.2.40", device_instance=2601, vendor_name=HIDDEN
    )
    bacnet_point = bacnet.points.create(
        key="analog-input-1", object_type="analog-input", instance=1, name=f"{HIDDEN} flow"
    )
    w.ids.update(bacnet_device=bacnet.pk, bacnet_point=bacnet_point.pk)
    w.ids.update(
        site=site.pk, private_feed=private.pk, public_feed=public.pk, sensor=sensor.pk,
        register=register.pk, bus=bus.pk, actuator=actuator.pk, alarm=alarm.pk, zone=zone.pk,
        schedule=schedule.pk, period=period.pk, exception=exception.pk, booking=booking.pk,
        override=override.pk, command=command.pk, node_command=node_command.pk,
        panel=panel.pk, display=private_display.pk, energy_site=energy_site.pk,
        energy_node=building.pk, meter=meter.pk, expected=expected.pk, fuel_rate=fuel_rate.pk,
    )  # fmt: skip
    # Plant for the schematic pages: each actuator on its own coil (one per coil).
    boiler = Actuator.objects.create(name=f"{HIDDEN} boiler", coil=1)
    plant = HeatingPlant.objects.create(name=f"{HIDDEN} plant", boiler=boiler)
    solar = SolarCircuit.objects.create(
        name=f"{HIDDEN} solar", collector_sensor=sensor, tank_sensor=sensor,
        pump=Actuator.objects.create(name=f"{HIDDEN} solar pump", coil=2),
    )  # fmt: skip
    from control.models import AnalogueCommand, RelayBoard, WeatherCompensation

    weather = WeatherCompensation.objects.create(
        plant=plant, mode="boiler_setpoint", register_host="10.0.0.9"
    )
    board = RelayBoard.objects.create(name=f"{HIDDEN} board", host="10.0.0.8", watchdog_register=1)
    output = AnalogueCommand.objects.create(plant=plant, value=50, unit="°C", reason=HIDDEN)
    from control.models import OutputOverride

    held = OutputOverride.objects.create(
        plant=plant, value=50, expires=timezone.now() + timedelta(hours=1),
        reason=f"{HIDDEN} output override",
    )  # fmt: skip
    w.ids.update(
        plant=plant.pk, solar=solar.pk, weather=weather.pk, relay_board=board.pk,
        analogue_command=output.pk, output_override=held.pk,
    )  # fmt: skip
    # The staff schedule pages (docs/CONTROL.md): a site calendar with one closure, and a
    # booking a person cancelled (the one an undo restores).
    from control.models import CalendarEntry, SiteCalendar

    site_calendar = SiteCalendar.objects.create(name=f"{HIDDEN} calendar")
    entry = CalendarEntry.objects.create(
        calendar=site_calendar, first_day=date(2031, 12, 24), last_day=date(2031, 12, 26),
        description=f"{HIDDEN} closure",
    )  # fmt: skip
    cancelled = Booking.objects.create(
        zone=zone, title=f"{HIDDEN} cancelled booking", start=start + timedelta(hours=3),
        end=start + timedelta(hours=4), cancelled=True, cancelled_by="engineer",
    )  # fmt: skip
    w.ids.update(site_calendar=site_calendar.pk, calendar_entry=entry.pk, cancelled=cancelled.pk)
    from control.models import HeatMain, HeatSource, ThermalStore

    heat_main = HeatMain.objects.create(name=f"{HIDDEN} heat main")
    source = HeatSource.objects.create(
        heat_main=heat_main, name=f"{HIDDEN} gas",
        actuator=Actuator.objects.create(name=f"{HIDDEN} gas boiler", coil=3),
    )  # fmt: skip
    store = ThermalStore.objects.create(
        heat_main=heat_main, name=f"{HIDDEN} store", top_sensor=sensor, bottom_sensor=sensor
    )
    w.ids.update(heat_main=heat_main.pk, heat_source=source.pk, thermal_store=store.pk)
    from findings.models import Finding

    finding = Finding.objects.create(
        rule="heating_unoccupied", key="heating_unoccupied:zone:hidden", subject=f"{HIDDEN} zone",
        period_start=start, period_end=start, last_seen=start, detail=HIDDEN, what_to_check=HIDDEN,
    )  # fmt: skip
    w.ids.update(finding=finding.pk)
    w.slugs.update(zone=zone.slug, private_display=private_display.slug, public=public_display.slug)
    yield w
    cache.clear_all()


@pytest.fixture
def nodes(db, redis_client):
    """Write keys of two nodes, alpha and beta (the ingest abuse and throttle tests)."""
    from sensors import cache
    from sensors.models import Node

    cache.clear_all()
    made = []
    for i, name in enumerate(("alpha", "beta")):
        node = Node(name=name, node_id=30 + i)
        key = node.set_new_key()
        node.save()
        made.append(key)
    yield made
    cache.clear_all()
