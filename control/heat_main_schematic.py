"""A heat main's schematic (beside control/schematic.py's plants and solar circuits): its heat
sources in sequence feeding the main's flow header, the flow sensor on it, its thermal store
with the store's charge and discharge pumps, and the zones it serves as branches, each element
with its live state and the last decision's reason.

Where things go is `heat_main_layout`, plain arithmetic on how many of each there are, so a
test can check that no two boxes overlap and all lie on the canvas for any number of sources
and zones (tests/control/test_heat_main_drawing.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control.models import HeatMain, ThermalStore
from control.schematic import (
    BOXES,
    ZONE_H,
    ZONE_W,
    _actuator_element,
    _commands,
    _sensor_element,
    zone_element,
)
from control.status import actuator_status, zone_status
from feeds.store import service as feed_service

MARGIN = 20
GAP = 20  # between neighbouring boxes
SOURCE_W = BOXES["boiler"][2] + GAP  # px per source column
SOURCES_Y = MARGIN
HEADER_Y = SOURCES_Y + BOXES["boiler"][3] + 60  # the main's flow header, under the sources
BRANCH_Y = HEADER_Y + 60  # where the store and the zones hang from the header
STORE_W = BOXES["tank"][2]
PUMP_X = MARGIN + STORE_W + 70  # the store's pumps, in a column beside it
PUMP_YS = (BRANCH_Y, BRANCH_Y + 110)  # charge, discharge
STORE_COLUMN_W = PUMP_X + 50 + GAP - MARGIN  # the store, its pumps and a gap before the zones


@dataclass(frozen=True)
class Layout:
    """Positions (an element's x, y as the template draws it) and the canvas size."""

    sources: list[tuple[float, float]]
    flow: tuple[float, float] | None
    store: tuple[float, float] | None
    pumps: list[tuple[float, float]]
    zones: list[tuple[float, float]]  # the centre of each zone's branch, and its box's top
    width: float
    height: float


def heat_main_layout(sources: int, flow: bool, store: bool, zones: int) -> Layout:
    """Sources in a row above the header; the flow sensor after them, above the header; the
    store and its two pumps in the first column under the header; then one column per zone."""
    source_xy = [(MARGIN + i * SOURCE_W, SOURCES_Y) for i in range(sources)]
    after_sources = MARGIN + sources * SOURCE_W
    flow_xy = (after_sources, HEADER_Y - BOXES["sensor"][3] - GAP) if flow else None
    top_width = after_sources + (BOXES["sensor"][2] + GAP if flow else 0)
    store_xy = (MARGIN, BRANCH_Y - 10) if store else None
    pumps = [(PUMP_X, y) for y in PUMP_YS] if store else []
    first_zone = MARGIN + (STORE_COLUMN_W if store else 0)
    zone_xy = [(first_zone + i * ZONE_W + ZONE_W // 2, BRANCH_Y) for i in range(zones)]
    width = max(700, top_width, first_zone + zones * ZONE_W) + MARGIN
    bottom = BRANCH_Y + ZONE_H
    if store:
        bottom = max(bottom, BRANCH_Y - 10 + BOXES["tank"][3])
    return Layout(source_xy, flow_xy, store_xy, pumps, zone_xy, width, bottom + MARGIN)


def heat_main_schematic(main: HeatMain) -> dict[str, Any]:
    sources = list(main.sources.select_related("actuator"))
    store = ThermalStore.objects.filter(heat_main=main).first()
    pumps = [p for p in (store.charge_pump, store.discharge_pump) if p] if store else []
    rows = {r["id"]: r for r in actuator_status([s.actuator for s in sources] + pumps)}
    commands = _commands(list(rows))
    zone_rows = zone_status(
        list(main.zones.select_related("temperature_sensor").prefetch_related("actuators"))
    )
    at = heat_main_layout(
        len(sources), bool(main.flow_sensor_id), store is not None, len(zone_rows)
    )
    elements = []
    pipes = []
    for s, (x, y) in zip(sources, at.sources, strict=True):
        element = _actuator_element(rows[s.actuator_id], commands, x, y, "boiler")
        element["name"] = s.name
        elements.append(element)
        middle = x + BOXES["boiler"][2] / 2
        pipes.append((middle, y + BOXES["boiler"][3], middle, HEADER_Y))
    if at.flow is not None:
        elements.append(_sensor_element("flow", "Main flow", main.flow_sensor, *at.flow))
    if store is not None and at.store is not None:
        elements.append(_store_element(store, rows, *at.store))
        tank_right = at.store[0] + STORE_W
        pipes.append((PUMP_X, HEADER_Y, PUMP_X, PUMP_YS[-1]))
        for pump, (x, y) in zip((store.charge_pump, store.discharge_pump), at.pumps, strict=True):
            pipes.append((tank_right, y, x, y))
            if pump is not None:
                elements.append(_actuator_element(rows[pump.pk], commands, x, y, "pump"))
    for z, (x, y) in zip(zone_rows, at.zones, strict=True):
        pipes.append((x, HEADER_Y, x, y))
        elements.append(zone_element(z, x, y))
    pipes.insert(0, (MARGIN, HEADER_Y, at.width - MARGIN, HEADER_Y))
    return {"title": main.name, "width": at.width, "height": at.height, "pipes": pipes,
            "elements": elements}  # fmt: skip


def _store_element(store: ThermalStore, rows: dict[int, dict], x: float, y: float) -> dict:
    """The store: its top and bottom temperatures and whether it is charging, serving the
    main or standing by (from its pumps' confirmed states), with the reasons on click."""
    feeds = [f for f in (store.top_sensor.feed_id, store.bottom_sensor.feed_id) if f]
    last = feed_service.last_values(feeds)

    def value(sensor) -> float | None:
        reading = last.get(sensor.feed_id) if sensor.feed_id else None
        return reading[1] if reading else None

    top, bottom = value(store.top_sensor), value(store.bottom_sensor)
    charge = rows.get(store.charge_pump_id) if store.charge_pump_id else None
    discharge = rows.get(store.discharge_pump_id) if store.discharge_pump_id else None
    if charge and charge["state"] == "ON":
        state, pump = "charging", charge
    elif discharge and discharge["state"] == "ON":
        state, pump = "serving the main", discharge
    else:
        state, pump = "standing by", charge or discharge

    def words(v: float | None) -> str:
        return "no reading" if v is None else f"{v:.1f} °C"

    why = (
        f"Top {words(top)}, bottom {words(bottom)}: {state}. It charges when its top falls "
        f"below {store.charge_start_c:g} °C until its bottom reaches {store.charge_stop_c:g} °C, "
        f"and serves the main while its top is at least {store.discharge_min_c:g} °C."
    )
    if pump is not None:
        why += f" {pump['name']}: {pump['why']}"
    element = _sensor_element("store", store.name, store.top_sensor, x, y)
    element.update(kind="tank", store=True, bottom=bottom, state=state, why=why,
                   css="unknown" if top is None or bottom is None else
                   ("on" if state != "standing by" else "sensor"))  # fmt: skip
    return element
