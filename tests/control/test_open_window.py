"""Open-window detection (control/engine/open_window.py): a drop while heating or a window
contact stops the zone's heating for a while, with its reason, and it resumes on its own.

The closed-loop tests run the pure evaluator against the demo's room and boiler physics
(demo/thermal.py) on a clock the test steps, 30 s a tick, as the live tick would, and assert the
relays' switching and the reason each switch was given."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from control import mapper
from control.engine import open_window
from control.engine.evaluator import evaluate
from control.engine.specs import (
    FROST,
    OPEN_WINDOW,
    OVERRIDE,
    BookingSpec,
    OverrideSpec,
    Reading,
    Snapshot,
    WindowSpec,
)
from control.models import WindowDetection
from demo.thermal import BoilerCircuit, Room

from .helpers import actuator_spec, plant_spec, snapshot, valve, zone

TICK_S = 30
START = datetime(2026, 1, 14, 8, 0, tzinfo=UTC)  # a Wednesday in January: GMT, clock = UTC


def window_spec(**kw) -> WindowSpec:
    """The defaults of a new WindowDetection row, as the live tick maps them."""
    return replace(mapper.window_spec(WindowDetection()), **kw)


@dataclass
class Switch:
    at: datetime
    actuator: str
    state: bool
    strategy: str
    reason: str


def simulate(minutes: int, window_open, *, contact=None, outside_c=2.0, spec=None):
    """Run the Hall (a booking 08:00–18:00) with its valve, boiler and pump for `minutes` of
    simulated time. `window_open(t)` says when the window is open; `contact(t)` what the window
    contact reads (None: no contact). Returns every relay switch and the room's trace."""
    spec = spec or window_spec(contact_name="Hall-window" if contact else "")
    room = Room(name="Hall", temperature_c=17.0)  # heating from the start
    circuit = BoilerCircuit(flow_c=70.0)
    booking = BookingSpec("Open day", START, START + timedelta(hours=10))
    acts = {
        10: valve(),
        20: actuator_spec(id=20, name="Boiler", kind="boiler", min_on_s=0, min_off_s=0,
                          is_on=False, confirmed=True),
        21: actuator_spec(id=21, name="Pump", kind="pump", min_on_s=0, min_off_s=0,
                          is_on=False, confirmed=True),
    }  # fmt: skip
    plant = plant_spec(id=1, name="Boiler house", boiler_id=20, pump_id=21, zone_ids=(1,),
                       has_bypass=True, kick=None)  # fmt: skip
    memory: dict = {}
    switches: list[Switch] = []
    modes: list[tuple[datetime, str, str]] = []
    now = START
    for _ in range(minutes * 60 // TICK_S):
        t = now.timestamp()
        hall = zone(
            room.temperature_c,
            now,
            bookings=(booking,),
            window=spec,
            window_contact=Reading(t - 10, contact(now)) if contact else None,
            optimum_start=False,
            reading=Reading(t - 10, round(room.temperature_c, 1)),  # a sensor's 0.1 K steps
        )
        snap = Snapshot(
            now=now,
            time_zone=mapper.site_settings().time_zone,
            zones=(hall,),
            actuators=acts,
            plants=(plant,),
            memory=memory,
        )
        result = evaluate(snap)
        memory = result.memory
        modes.append((now, result.zones[1].mode, result.zones[1].reason))
        for aid, d in result.decisions.items():
            if d.state != acts[aid].is_on:
                switches.append(Switch(now, acts[aid].name, d.state, d.strategy, d.reason))
                acts[aid] = replace(acts[aid], is_on=d.state, changed_at=t)
        room.window_open = window_open(now)
        circuit.step(TICK_S, acts[20].is_on, acts[21].is_on, room.last_heat_w)
        room.step(TICK_S, outside_c, acts[10].is_on, circuit.flow_c, acts[21].is_on)
        now += timedelta(seconds=TICK_S)
    return switches, modes


def _valve(switches: list[Switch]) -> list[Switch]:
    return [s for s in switches if s.actuator == "Hall valve"]


def test_a_window_opened_while_heating_stops_the_valve_for_the_pause_then_it_resumes():
    opened = START + timedelta(minutes=20)
    closed = opened + timedelta(minutes=10)
    switches, modes = simulate(90, lambda t: opened <= t < closed)

    valve_switches = _valve(switches)
    assert [(s.state, s.strategy) for s in valve_switches[:3]] == [
        (True, "booking"),
        (False, OPEN_WINDOW),
        (True, "booking"),
    ]
    heating, stopped, resumed = valve_switches[:3]
    assert heating.at == START
    # Found within the look-back (5 min) of the window opening, not before it opened.
    assert opened < stopped.at <= opened + timedelta(minutes=5)
    assert stopped.reason.startswith("Window open: temperature fell ")
    assert "limit 0.5 K in 5 min) while heating — heating off until" in stopped.reason
    until = stopped.at + timedelta(minutes=30)
    assert f"until {until:%H:%M} (30 min), then resumes" in stopped.reason
    # Resumes on its own at the end of the pause (the window long closed), and says why.
    assert resumed.at == until
    assert resumed.reason.startswith("Booking 'Open day' 08:00–18:00: ")
    assert resumed.reason.endswith(f"(open-window pause ended {until:%H:%M}: heating resumes)")
    # The boiler follows: no demand while the only zone is paused, and it fires again once
    # the valve has read back open (the tick after).
    tick = timedelta(seconds=TICK_S)
    boiler = [s for s in switches if s.actuator == "Boiler"]
    assert [(s.at, s.state) for s in boiler[:3]] == [
        (START + tick, True),
        (stopped.at, False),
        (until + tick, True),
    ]
    # The zone stays paused tick after tick in between, with the same reason.
    paused = [m for m in modes if stopped.at <= m[0] < until]
    assert {m[1] for m in paused} == {OPEN_WINDOW}
    assert len(paused) == 30 * 60 // TICK_S


def test_a_heated_room_with_its_window_shut_is_never_paused():
    switches, modes = simulate(120, lambda t: False)
    assert OPEN_WINDOW not in {m[1] for m in modes}
    assert all(s.strategy != OPEN_WINDOW for s in switches)


def test_a_window_opened_again_after_a_pause_is_found_again():
    first = (START + timedelta(minutes=20), START + timedelta(minutes=30))
    second = (START + timedelta(minutes=70), START + timedelta(minutes=80))
    switches, _ = simulate(130, lambda t: first[0] <= t < first[1] or second[0] <= t < second[1])
    valve_switches = _valve(switches)
    assert [s.strategy for s in valve_switches[:5]] == [
        "booking", OPEN_WINDOW, "booking", OPEN_WINDOW, "booking",
    ]  # fmt: skip
    # The drop is measured afresh after the first pause: the second stop is the second opening.
    assert second[0] < valve_switches[3].at <= second[0] + timedelta(minutes=5)


def test_the_window_contact_stops_heating_while_open_and_it_resumes_when_shut():
    opened = START + timedelta(minutes=20)
    closed = START + timedelta(minutes=50)
    is_open = lambda t: opened <= t < closed  # noqa: E731
    switches, _ = simulate(70, is_open, contact=lambda t: 1.0 if is_open(t) else 0.0)
    valve_switches = _valve(switches)
    assert [(s.at, s.state, s.strategy) for s in valve_switches[:3]] == [
        (START, True, "booking"),
        (opened, False, OPEN_WINDOW),
        (closed, True, "booking"),
    ]
    assert valve_switches[1].reason == (
        "Window open: contact 'Hall-window' open since 08:20 — heating off while it is open "
        f"({valve_switches[1].reason.rsplit('(', 1)[1]}"
    )
    assert valve_switches[2].reason.endswith("(window contact closed: heating resumes)")


# --- the rule on hand-made snapshots -------------------------------------------------------

NOW = START + timedelta(hours=1)


def _hall(temp: float, **kw):
    kw.setdefault("window", window_spec())
    kw.setdefault("bookings", (BookingSpec("Open day", START, START + timedelta(hours=10)),))
    return zone(temp, NOW, optimum_start=False, **kw)


def _heating_memory(trace: list[list[float]], heating_since: float | None = None) -> dict:
    """Heating with a trace; since an hour before the trace unless said (settled: judged)."""
    since = (trace[0][0] - 3600) if heating_since is None else heating_since
    return {
        "zone:1:heat": True,
        "zone:1:window_trace": trace,
        "zone:1:window_heating_since": since,
    }


def test_a_room_still_cooling_as_its_heating_starts_is_not_a_window():
    # The radiator warms first: a drop within the first look-back of heating is not judged,
    # or a cold room (and every room after a pause) would pause again and never heat.
    t = NOW.timestamp() - 30
    memory = _heating_memory([[t - 240, 20.5]], heating_since=t - 240)
    result = evaluate(snapshot([_hall(19.0)], [valve(is_on=True)], NOW, memory=memory))
    assert result.zones[1].mode == "booking"
    memory = _heating_memory([[t - 240, 20.5]], heating_since=t - 300)  # a whole look-back
    result = evaluate(snapshot([_hall(19.0)], [valve(is_on=True)], NOW, memory=memory))
    assert result.zones[1].mode == OPEN_WINDOW


def test_a_drop_at_the_limit_is_a_window_and_just_under_it_is_not():
    t = NOW.timestamp() - 30
    before = [[t - 240, 20.5]]
    opened = valve(is_on=True)  # confirmed open by its board: the room takes heat
    under = evaluate(snapshot([_hall(20.01)], [opened], NOW, memory=_heating_memory(before)))
    assert under.zones[1].mode == "booking"
    at_limit = evaluate(snapshot([_hall(20.0)], [opened], NOW, memory=_heating_memory(before)))
    assert at_limit.zones[1].mode == OPEN_WINDOW
    assert at_limit.zones[1].flags == ("window_open",)
    assert "temperature fell 0.5 K in 4 min (20.5 → 20.0 °C" in at_limit.zones[1].reason


@pytest.mark.parametrize(
    "changes",
    [{"is_on": False}, {"is_on": True, "confirmed": False}, {"is_on": True, "fault": True}],
)
def test_a_room_whose_valve_is_not_confirmed_open_is_not_judged_by_its_cooling(changes):
    t = NOW.timestamp() - 30
    memory = _heating_memory([[t - 240, 21.0]])
    result = evaluate(snapshot([_hall(20.0)], [valve(**changes)], NOW, memory=memory))
    assert result.zones[1].mode == "booking"  # shut, unconfirmed or faulty: no window assumed
    assert result.memory["zone:1:window_trace"] == [[t, 20.0]]


def test_a_drop_older_than_the_look_back_is_not_counted():
    t = NOW.timestamp() - 30
    old = [[t - 301, 21.0], [t - 200, 20.2]]
    result = evaluate(
        snapshot([_hall(20.0)], [valve(is_on=True)], NOW, memory=_heating_memory(old))
    )
    assert result.zones[1].mode == "booking"
    assert result.memory["zone:1:window_trace"] == [[t - 200, 20.2], [t, 20.0]]


def test_a_room_that_is_not_heating_is_not_judged_by_its_cooling():
    t = NOW.timestamp() - 30
    memory = {"zone:1:heat": False, "zone:1:window_trace": [[t - 120, 23.0]]}
    result = evaluate(snapshot([_hall(19.0)], [valve()], NOW, memory=memory))
    assert result.zones[1].mode == "booking"
    assert result.memory["zone:1:window_trace"] == [[t, 19.0]]  # measured afresh from here


def test_frost_protection_wins_over_an_open_window_pause():
    memory = {"zone:1:window": {"cause": "drop", "since": NOW.timestamp() - 60,
                                "until": NOW.timestamp() + 1700, "detail": "temperature fell"}}  # fmt: skip
    result = evaluate(snapshot([_hall(4.5)], [valve()], NOW, memory=memory))
    assert result.zones[1].mode == FROST
    assert result.decisions[10].state is True
    assert result.decisions[10].strategy == FROST


def test_an_engineers_override_wins_over_an_open_window():
    held = OverrideSpec(True, NOW + timedelta(hours=1), "commissioning", 1, "eng")
    contact = Reading(NOW.timestamp() - 10, 1.0)
    spec = window_spec(contact_name="Hall-window")
    result = evaluate(
        snapshot([_hall(20.0, window=spec, window_contact=contact, override=held)], [valve()], NOW)
    )
    assert result.zones[1].mode == OVERRIDE
    assert result.decisions[10].state is True


def test_a_contact_reading_0_when_open_is_read_the_right_way_round():
    spec = window_spec(contact_name="Hall-window", contact_open=0)
    closed = Reading(NOW.timestamp() - 10, 1.0)
    opened = Reading(NOW.timestamp() - 10, 0.0)
    result = evaluate(snapshot([_hall(19.0, window=spec, window_contact=closed)], [valve()], NOW))
    assert result.zones[1].mode == "booking"
    result = evaluate(snapshot([_hall(19.0, window=spec, window_contact=opened)], [valve()], NOW))
    assert result.zones[1].mode == OPEN_WINDOW
    assert result.decisions[10].state is False


@pytest.mark.parametrize("contact", [None, "stale"])
def test_a_lost_window_contact_is_alarmed_and_does_not_stop_the_heating(contact):
    spec = window_spec(contact_name="Hall-window")
    reading = None if contact is None else Reading(NOW.timestamp() - 3600, 1.0)
    result = evaluate(snapshot([_hall(19.0, window=spec, window_contact=reading)], [valve()], NOW))
    assert result.zones[1].mode == "booking"
    assert result.decisions[10].state is True
    alarm = result.alarms["zone-window-contact:1"]
    assert alarm.startswith("Zone 'Hall': window contact: ")
    assert "'Hall-window'" in alarm
    assert alarm.endswith("Open-window detection by contact is off until it reports again")


def test_the_trace_is_bounded_at_its_limit_keeping_the_newest():
    t0 = NOW.timestamp()
    trace: list = []
    for i in range(open_window.MAX_TRACE + 50):
        trace = open_window.add_reading(trace, t0 + i, 20.0, 3600)
    assert len(trace) == open_window.MAX_TRACE
    assert trace[-1][0] == t0 + open_window.MAX_TRACE + 49
    # A repeated reading (same time stamp: no new post since the last tick) is not added.
    assert open_window.add_reading(trace, trace[-1][0], 19.0, 3600) is trace


def test_a_latched_preheat_is_held_over_a_pause():
    memory = {
        "zone:1:window": {"cause": "drop", "since": NOW.timestamp() - 60,
                          "until": NOW.timestamp() + 1700, "detail": "temperature fell"},
        "zone:1:preheat": {"occupancy": NOW.timestamp() + 3600, "started": NOW.timestamp() - 600},
    }  # fmt: skip
    result = evaluate(snapshot([_hall(18.0, bookings=())], [valve()], NOW, memory=memory))
    assert result.zones[1].mode == OPEN_WINDOW
    assert result.memory["zone:1:preheat"] == memory["zone:1:preheat"]
    assert result.memory["zone:1:window"] == memory["zone:1:window"]


def test_without_a_detection_row_nothing_changes():
    t = NOW.timestamp() - 30
    result = evaluate(
        snapshot([_hall(18.0, window=None)], [valve()], NOW, memory=_heating_memory([[t, 22.0]]))
    )
    assert result.zones[1].mode == "booking"
    assert "zone:1:window_trace" not in result.memory


@pytest.mark.django_db
def test_the_spec_carries_the_rows_defaults_and_a_zone_without_a_row_has_none():
    from control.models import Zone

    row = WindowDetection()
    spec = mapper.window_spec(row)
    assert (spec.detect_drop, spec.drop_k, spec.drop_window_s, spec.pause_s) == (
        row.detect_drop,
        row.drop_k,
        row.drop_minutes * 60,
        row.pause_min * 60,
    )
    assert (spec.drop_k, spec.drop_window_s, spec.pause_s, spec.contact_open) == (0.5, 300, 1800, 1)
    site = mapper.site_settings()
    hall = Zone.objects.create(name="Hall", slug="hall")
    assert mapper.zone_spec(hall, site).window is None
    WindowDetection.objects.create(zone=hall, enabled=False)
    assert mapper.zone_spec(Zone.objects.get(pk=hall.pk), site).window is None
    WindowDetection.objects.filter(zone=hall).update(enabled=True, pause_min=45)
    assert mapper.zone_spec(Zone.objects.get(pk=hall.pk), site).window.pause_s == 2700
