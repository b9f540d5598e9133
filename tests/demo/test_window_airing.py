"""The demo site shows open-window detection working: the seminar room is aired daily at 12:30
(demo/layout.py) and its zone, set up with the detection's defaults by the demo site, stops
heating when the simulated room falls, then resumes on its own.

The demo's own zone (mapped from the database as the live tick maps it) drives the demo's room
physics (demo/plant.py) through the pure evaluator, 30 s a step on the test's clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.specs import OPEN_WINDOW, Reading, Snapshot
from control.models import WindowDetection
from demo import layout
from demo.plant import Coils, DemoPlant
from demo.site import ensure_demo_site

TICK_S = 30
NOON = datetime(2026, 1, 14, 12, 0, tzinfo=UTC)  # a Wednesday: office hours, GMT
AIRED = next(r for r in layout.ROOMS if r.airing_at is not None)


@pytest.fixture
def demo(tmp_path, settings, redis_client):
    settings.BMS_DATA_DIR = tmp_path
    return ensure_demo_site(tmp_path / "demo" / "keys.json", now=NOON)


@pytest.mark.django_db
def test_every_demo_room_has_open_window_detection_with_its_defaults(demo):
    rows = WindowDetection.objects.filter(zone__in=demo.zones.values())
    assert rows.count() == len(layout.ROOMS)
    default = WindowDetection()
    assert {(r.enabled, r.drop_k, r.drop_minutes, r.pause_min) for r in rows} == {
        (True, default.drop_k, default.drop_minutes, default.pause_min)
    }


@pytest.mark.django_db
def test_the_aired_room_stops_heating_while_aired_and_resumes_on_its_own(demo):
    zone = demo.zones[AIRED.slug]
    site = mapper.site_settings()
    valve = zone.actuators.get()
    spec = mapper.zone_spec(zone, site, actuator_ids=[valve.pk])
    act = replace(mapper.actuator_spec(valve), is_on=False, confirmed=True, min_on_s=0, min_off_s=0)
    plant = DemoPlant(NOON, seed=3)
    plant.rooms[AIRED.slug].temperature_c = 17.0  # still heating up by the airing
    plant.circuit.flow_c = 70.0
    memory: dict = {}
    switches = []
    now = NOON
    while now < NOON + timedelta(minutes=90):
        temp = round(plant.rooms[AIRED.slug].temperature_c, 1)
        snap = Snapshot(
            now=now,
            time_zone=site.time_zone,
            zones=(replace(spec, reading=Reading(now.timestamp() - 5, temp)),),
            actuators={act.id: act},
            memory=memory,
        )
        result = evaluate(snap)
        memory = result.memory
        decision = result.decisions[act.id]
        if decision.state != act.is_on:
            switches.append((now, decision.state, decision.strategy, decision.reason))
            act = replace(act, is_on=decision.state, changed_at=now.timestamp())
        now += timedelta(seconds=TICK_S)
        coils = Coils(boiler=True, heating_pump=True, valves={AIRED.slug: bool(act.is_on)})
        plant.step(now, TICK_S, 1.0, coils)

    opened = NOON.replace(hour=AIRED.airing_at[0], minute=AIRED.airing_at[1])
    assert [(s[1], s[2]) for s in switches[:3]] == [
        (True, "schedule"),
        (False, OPEN_WINDOW),
        (True, "schedule"),
    ]
    stopped, resumed = switches[1], switches[2]
    assert opened < stopped[0] <= opened + timedelta(minutes=5)
    assert stopped[3].startswith("Window open: temperature fell ")
    assert resumed[0] == stopped[0] + timedelta(minutes=30)
    assert resumed[3].endswith("heating resumes)")
