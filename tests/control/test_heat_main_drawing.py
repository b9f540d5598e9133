"""The heat main's drawing and status words (#27 items 2 and 3): boxes never overlap and lie on
the canvas for any number of sources and zones; the store is drawn with its pumps and shows
its top, bottom and charging state; a source held on by its minimum run is counted as
running; a room at its target is said to be at target."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from control.drivers.simulated_board import RelayBoard
from control.heat_main_schematic import heat_main_layout, heat_main_schematic
from control.models import Booking, HeatMain, HeatSource
from control.runner import run_tick
from control.schematic import ZONE_W, element_box
from control.words import zone_words
from feeds.models import Feed
from feeds.store import service as feed_service
from sensors.models import Sensor

from . import factories as f

MORNING = datetime(2026, 1, 14, 7, 0, tzinfo=UTC)


def _assert_apart_and_on_canvas(boxes: dict[str, tuple], width: float, height: float) -> None:
    for name, (left, top, right, bottom) in boxes.items():
        assert 0 <= left and right <= width and 0 <= top and bottom <= height, (name, width, height)
    for (a, (al, at, ar, ab)), (b, (bl, bt, br, bb)) in itertools.combinations(boxes.items(), 2):
        assert ar <= bl or br <= al or ab <= bt or bb <= at, f"{a} overlaps {b}"


def _layout_boxes(sources: int, flow: bool, store: bool, zones: int):
    at = heat_main_layout(sources, flow, store, zones)
    elements = {f"source {i}": {"kind": "boiler", "x": x, "y": y} for i, (x, y) in
                enumerate(at.sources)}  # fmt: skip
    if at.flow:
        elements["flow"] = {"kind": "sensor", "x": at.flow[0], "y": at.flow[1]}
    if at.store:
        elements["store"] = {"kind": "tank", "x": at.store[0], "y": at.store[1]}
    for i, (x, y) in enumerate(at.pumps):
        elements[f"pump {i}"] = {"kind": "pump", "x": x, "y": y}
    for i, (x, y) in enumerate(at.zones):
        elements[f"zone {i}"] = {"kind": "zone", "x": x - (ZONE_W - 14) / 2, "y": y,
                                 "w": ZONE_W - 14}  # fmt: skip
    return {k: element_box(e) for k, e in elements.items()}, at


@pytest.mark.parametrize(
    "sources,flow,store,zones",
    [(6, True, True, 12), (6, True, False, 12), (1, False, True, 1), (0, True, True, 0),
     (2, True, True, 4), (12, True, True, 2)],
)  # fmt: skip
def test_boxes_never_overlap_and_lie_on_the_canvas(sources, flow, store, zones):
    boxes, at = _layout_boxes(sources, flow, store, zones)
    assert len(boxes) == sources + flow + (3 if store else 0) + zones
    _assert_apart_and_on_canvas(boxes, at.width, at.height)


@pytest.mark.django_db
def test_the_demo_mains_drawing_has_no_overlap_and_the_store_with_its_pumps(
    tmp_path, settings, redis_client
):
    from demo.site import ensure_demo_site

    settings.BMS_DATA_DIR = tmp_path
    demo = ensure_demo_site(tmp_path / "keys.json", now=MORNING)
    main = HeatMain.objects.get(name="Site heat main")
    store = main.store
    t = int(datetime.now(UTC).timestamp())
    feed_service.log_points([(store.top_sensor.feed_id, t, 58.4),
                             (store.bottom_sensor.feed_id, t, 41.2)])  # fmt: skip
    diagram = heat_main_schematic(main)
    drawn = {e["key"]: e for e in diagram["elements"]}
    boxes = {key: element_box(e) for key, e in drawn.items()}
    _assert_apart_and_on_canvas(boxes, diagram["width"], diagram["height"])
    for handle in ("store_charge", "store_discharge", "biomass", "gas_boiler_2"):
        assert f"actuator-{demo.actuators[handle].pk}" in drawn
    tank = drawn["store"]
    assert (tank["value"], tank["bottom"], tank["state"]) == (58.4, 41.2, "standing by")
    assert tank["why"].startswith("Top 58.4 °C, bottom 41.2 °C: standing by. It charges when")


def test_a_room_at_its_target_is_at_target_not_warming_up_early():
    assert zone_words("optimum_start", False, 20.2, 20.0) == "at target"
    assert zone_words("booking", False, 20.0, 20.0) == "at target"
    # Still below, or still calling (the thermostat's band): what it is doing.
    assert zone_words("optimum_start", False, 19.8, 20.0) == "warming up early"
    assert zone_words("optimum_start", True, 20.2, 20.0) == "warming up early"
    assert zone_words("frost_protection", False, 9.0, 5.0) == "frost protection"
    assert zone_words("optimum_start", False, None, 20.0) == "warming up early"


@pytest.mark.django_db
def test_a_source_held_by_its_minimum_run_is_counted_running_and_a_warm_room_at_target(
    redis_client, viewer, settings, tmp_path
):
    from django.utils import timezone

    settings.BMS_DATA_DIR = tmp_path
    with RelayBoard(coils=32) as board:
        valve = f.relay("Hall valve", board, coil=3)
        zone = f.zone("Hall", valve, temp=15.0, optimum_start=False)
        now = timezone.now()
        Booking.objects.create(zone=zone, title="Open day", start=now - timedelta(minutes=1),
                               end=now + timedelta(hours=4))  # fmt: skip
        flow = Sensor.objects.create(
            node=zone.temperature_sensor.node, key="main-flow", kind="temperature",
            feed=Feed.objects.create(name="Main flow", tag="test", unit="°C", interval=10),
        )  # fmt: skip
        feed_service.log_points([(flow.feed_id, int(now.timestamp()), 60.0)])
        main = HeatMain.objects.create(name="Heat main", flow_sensor=flow)
        main.zones.set([zone])
        biomass = f.relay("Biomass", board, coil=1, kind="boiler", min_on_s=7200)
        HeatSource.objects.create(heat_main=main, name="Biomass", actuator=biomass, order=1)
        run_tick(now)  # the valve opens
        run_tick(now + timedelta(seconds=30))  # the valve read back open: the lead fires
        assert board.coil(1) is True
        # The room reaches its target: no call, but the biomass is held by its 2 h run.
        f.set_temperature(zone, 20.4, (now + timedelta(seconds=50)).timestamp())
        feed_service.log_points([(flow.feed_id, int(now.timestamp()) + 50, 60.0)])
        run_tick(now + timedelta(seconds=60))
        assert board.coil(1) is True

    c = Client()
    c.force_login(viewer)
    page = c.get("/staff/control/").content.decode()
    table = page[page.index(f'id="heat-main-{main.pk}"') :]
    table = table[: table.index("</table>")]
    assert "0 stages called, 1 running (held by its 2 h minimum run)" in table
    drawn = {
        e["key"]: e
        for e in c.get(f"/staff/control/heat-main/{main.pk}/").context["diagram"]["elements"]
    }
    assert drawn[f"zone-{zone.pk}"]["css"] == "off"
    assert drawn[f"zone-{zone.pk}"]["mode_words"] == "at target"
