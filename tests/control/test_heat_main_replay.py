"""A heat main replays over recorded history (control/heat_main_replay.py, `replay_strategy
--heat-main`): the same evaluator, its memory carried from step to step, over the zones' recorded
temperatures, the recorded flow, the store's top and bottom and the collector; the report lists
the stages, the lead rotation and the store's charge and discharge with their reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command

from control import heat_main_replay
from control.heat_main_replay import replay_heat_main
from control.models import Booking, HeatMain, HeatSource, SolarCircuit, ThermalStore
from feeds.store import service as feed_service
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 1, 14, tzinfo=UTC)  # GMT: local = UTC
LATER = DAY + timedelta(days=2)


@pytest.fixture(autouse=True)
def feeds_of_this_test(settings, tmp_path):
    settings.BMS_DATA_DIR = tmp_path


def at(hour: int, minute: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


def relay(name: str, kind: str) -> Actuator:
    """Each on its own coil (one relay per coil)."""
    return Actuator.objects.create(
        name=name, kind=kind, host="127.0.0.1", port=1, coil=Actuator.objects.count(),
        min_on_s=0, min_off_s=0,
    )  # fmt: skip


def record(sensor, spans: list[tuple[datetime, datetime, float]]) -> None:
    """A reading a minute over each span, as a node posts them."""
    points = []
    for begin, end, value in spans:
        t = begin
        while t < end:
            points.append((sensor.feed_id, int(t.timestamp()), value))
            t += timedelta(minutes=1)
    feed_service.log_points(points)


def hall(booked_from: datetime, booked_to: datetime):
    zone = f.zone("Hall", relay("Hall valve", "valve"), optimum_start=False)
    Booking.objects.create(zone=zone, title="Open day", start=booked_from, end=booked_to)
    record(zone.temperature_sensor, [(at(5), at(13), 15.0)])
    return zone


@pytest.fixture
def cascade():
    """Two gas boilers; the flow recorded low at first, then in band, then high."""
    zone = hall(at(8), at(12))
    flow = f.temperature_sensor("main-flow")
    record(flow, [(at(7), at(8, 20), 60.0), (at(8, 20), at(11), 78.0), (at(11), at(13), 85.0)])
    main = HeatMain.objects.create(
        name="Heat main", flow_sensor=flow, rotate_weekly=False, rotate_hours=1.0
    )
    main.zones.set([zone])
    for order, name in ((1, "Gas 1"), (2, "Gas 2")):
        HeatSource.objects.create(
            heat_main=main, name=name, actuator=relay(name, "boiler"), order=order
        )
    return main


def test_the_stages_and_the_lead_rotation_replay_with_their_reasons(cascade):
    report = replay_heat_main(cascade, at(7), at(12, 30), step_s=60, now=LATER)
    seq = [(s.at.strftime("%H:%M"), s.actuator, s.state) for s in report.switches]
    assert seq == [
        # The valve opens at 08:00 and reads back open: the lead fires the next minute.
        ("08:01", "Gas 1", True),
        ("08:11", "Gas 2", True),  # flow below 70 °C for 10 min
        ("11:05", "Gas 2", False),  # flow above 80 °C for 5 min
        # Gas 1 has run an hour more than Gas 2: Gas 2 leads.
        ("11:55", "Gas 2", True),
        ("11:55", "Gas 1", False),
        ("12:00", "Gas 2", False),  # the booking is over
    ]
    reasons = [s.reason for s in report.switches]
    assert reasons[0] == "Stage 1 of 1 (lead): Heat demand from Hall, flow 60.0 °C (set 75 °C)"
    assert reasons[1].startswith(
        "Stage 2 of 2 (lag 1): stage up: flow below 70 °C for 10 min (Heat demand from Hall)"
    )
    assert reasons[2].startswith(
        "Standby (lag 1): stage down: flow above 80 °C for 5 min (Heat demand from Hall)"
    )
    assert reasons[3].endswith(
        "; lead rotated from 'Gas 1' (1 h more run than 'Gas 2' (limit 1 h))"
    )
    assert reasons[5].startswith("Standby (lead): No zone calls for heat")
    assert [(r.at.strftime("%H:%M"), r.reason) for r in report.rotations] == [
        ("11:55", "lead rotated from 'Gas 1' (1 h more run than 'Gas 2' (limit 1 h))")
    ]
    hours = {s.name: (round(s.hours, 2), s.starts) for s in report.sources}
    assert hours == {"Gas 1": (3.9, 1), "Gas 2": (2.98, 2)}
    assert report.missing == {"flow": 0, "room 'Hall'": 0} and report.alarms == []
    assert report.assumed == []


def test_the_command_prints_the_heat_main_replay(cascade, capsys):
    call_command(
        "replay_strategy", "--heat-main", "Heat main", "--from", "2026-01-14T07:00",
        "--to", "2026-01-14T12:30", "--step", "60",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "Replay of heat main 'Heat main' " in out
    assert "  Gas 1: 3.90 h, 1 start\n" in out
    assert "Lead rotations: 1\n" in out
    assert "Gas 2: ON   Stage 1 of 1 (lead): Heat demand from Hall" in out
    with pytest.raises(CommandError, match="Name a zone or a --heat-main"):
        call_command("replay_strategy", "hall", "--heat-main", "Heat main", "--from", "2026-01-14",
                     "--to", "2026-01-14")  # fmt: skip
    with pytest.raises(CommandError, match="No heat main named 'Nope'"):
        call_command("replay_strategy", "--heat-main", "Nope", "--from", "2026-01-14",
                     "--to", "2026-01-14")  # fmt: skip


def test_zones_times_steps_are_bounded(cascade, monkeypatch):
    """One zone, 07:00–12:30 at 60 s: 330 zone-steps. At the bound it runs; one over, the
    refusal names the step to use."""
    monkeypatch.setattr(heat_main_replay, "MAX_ZONE_STEPS", 330)
    assert replay_heat_main(cascade, at(7), at(12, 30), step_s=60, now=LATER).samples == 330
    monkeypatch.setattr(heat_main_replay, "MAX_ZONE_STEPS", 329)
    with pytest.raises(
        ValueError, match=r"Too many steps for 1 zone\(s\): use a step of at least 120 s"
    ):
        replay_heat_main(cascade, at(7), at(12, 30), step_s=60, now=LATER)


@pytest.fixture
def store_main():
    """One gas boiler, a store fed by a solar circuit (its tank sensor is the store's bottom)."""
    zone = hall(at(10), at(12))
    flow, top, bottom, collector = (
        f.temperature_sensor(n) for n in ("main-flow", "store-top", "store-bottom", "collector")
    )
    record(flow, [(at(5), at(13), 70.0)])
    # The sun from before 05:30 to 07:00; a draw at 06:00 takes the top below 55 °C; the
    # recorded charge has the store full at 08:00; the zone's draw cools it by 11:00.
    record(collector, [(at(5), at(7), 80.0), (at(7), at(13), 20.0)])
    record(top, [(at(5), at(6), 56.0), (at(6), at(8), 52.0), (at(8), at(11), 72.0),
                 (at(11), at(13), 58.0)])  # fmt: skip
    record(bottom, [(at(5), at(6), 50.0), (at(6), at(8), 47.0), (at(8), at(11), 70.0),
                    (at(11), at(13), 50.0)])  # fmt: skip
    main = HeatMain.objects.create(name="Heat main", flow_sensor=flow, rotate_weekly=False)
    main.zones.set([zone])
    HeatSource.objects.create(heat_main=main, name="Gas 1", actuator=relay("Gas 1", "boiler"))
    ThermalStore.objects.create(
        heat_main=main, name="Buffer", top_sensor=top, bottom_sensor=bottom,
        charge_pump=relay("Charge pump", "pump"), discharge_pump=relay("Discharge pump", "pump"),
    )  # fmt: skip
    SolarCircuit.objects.create(
        name="Roof", collector_sensor=collector, tank_sensor=bottom,
        pump=relay("Solar pump", "pump"),
    )  # fmt: skip
    return main


def test_the_store_charge_discharge_and_the_sun_replay_with_their_reasons(store_main):
    report = replay_heat_main(store_main, at(5, 30), at(11, 30), step_s=60, now=LATER)
    seq = [(s.at.strftime("%H:%M"), s.actuator, s.state) for s in report.switches]
    assert seq == [
        ("05:30", "Solar pump", True),
        # 06:00: the top is below 55 °C, but the sun is charging: no charge from the gas.
        ("07:00", "Solar pump", False),
        ("07:01", "Gas 1", True),
        ("07:01", "Charge pump", True),  # with its source: heat to charge with
        ("08:00", "Gas 1", False),
        ("08:00", "Charge pump", False),  # the bottom reached 70 °C
        ("10:01", "Discharge pump", True),  # the zone calls: the store serves it
        ("11:00", "Gas 1", True),
        ("11:00", "Discharge pump", False),  # top 58 °C: too cool to serve
    ]
    why = {(s.at.strftime("%H:%M"), s.actuator): s.reason for s in report.switches}
    assert why[("07:01", "Gas 1")].startswith(
        "Stage 1 of 1 (lead): Store 'Buffer' charging: top 52.0 °C (starts below 55 °C), until "
        "the bottom reaches 70 °C (now 47.0 °C)"
    )
    assert why[("10:01", "Discharge pump")] == "Store 'Buffer' serves the main: top 72.0 °C ≥ 60 °C"
    assert why[("11:00", "Gas 1")].startswith("Stage 1 of 1 (lead): Heat demand from Hall")
    store = report.store
    assert store is not None and store.charges == 1
    assert round(store.charging_hours, 2) == 0.98  # 07:01–08:00
    assert round(store.serving_hours, 2) == 0.98  # 10:01–11:00
    assert round(store.solar_hours, 2) == 1.5  # 05:30–07:00
    assert report.missing == {
        "flow": 0, "store top": 0, "store bottom": 0, "collector 'Roof'": 0, "room 'Hall'": 0
    }  # fmt: skip


def test_a_lost_store_sensor_in_the_history_is_an_alarm_in_the_report(store_main):
    """No reading of the store's top after 08:00 (a node off the air): the replay says when
    the live tick would have alarmed."""
    store = ThermalStore.objects.get()
    store.top_sensor = f.temperature_sensor("unrecorded")
    store.save()
    report = replay_heat_main(store_main, at(7), at(8), step_s=60, now=LATER)
    assert [(a.at.strftime("%H:%M"), a.key) for a in report.alarms] == [
        ("07:00", f"store-sensor:{store.pk}")
    ]
    assert report.alarms[0].text.startswith("Thermal store 'Buffer': ")
    assert report.missing["store top"] == 60


def test_lost_room_readings_are_counted_and_the_assumed_demand_said(redis_client):
    """The room drives the made-up demand: with no reading of it (its node off the air) the
    steps are counted like the flow's, and the report says the zone's demand was assumed."""
    zone = f.zone("Hall", relay("Hall valve", "valve"), optimum_start=False)
    Booking.objects.create(zone=zone, title="Open day", start=at(7), end=at(12))
    flow = f.temperature_sensor("main-flow")
    record(flow, [(at(5), at(13), 70.0)])
    main = HeatMain.objects.create(name="Heat main", flow_sensor=flow)
    main.zones.set([zone])
    HeatSource.objects.create(heat_main=main, name="Gas 1", actuator=relay("Gas 1", "boiler"))
    report = replay_heat_main(main, at(7), at(10), step_s=60, now=LATER)
    assert report.missing["room 'Hall'"] == 180
    assert report.missing["flow"] == 0
    [assumed] = report.assumed
    assert (assumed.zone, assumed.first, assumed.steps) == ("Hall", at(7), 180)
    text = report.as_text(ZoneInfo("UTC"))
    assert f"  Hall: demand assumed for {assumed.steps} steps from " in text
    assert f"(room reading lost: {assumed.example})" in text
