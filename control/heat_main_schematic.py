"""A heat main's schematic (beside control/schematic.py's plants and solar circuits): its heat
sources in sequence feeding the main's flow header, the flow sensor on it, and the zones it
serves as branches, each element with its live state and the last decision's reason."""

from __future__ import annotations

from typing import Any

from control.models import HeatMain
from control.schematic import (
    HEADER_Y,
    ZONE_W,
    _actuator_element,
    _commands,
    _sensor_element,
    zone_element,
)
from control.status import actuator_status, zone_status

SOURCE_W = 130  # px per source


def heat_main_schematic(main: HeatMain) -> dict[str, Any]:
    sources = list(main.sources.select_related("actuator"))
    rows = {r["id"]: r for r in actuator_status([s.actuator for s in sources])}
    commands = _commands(list(rows))
    elements = []
    for i, s in enumerate(sources):
        element = _actuator_element(rows[s.actuator_id], commands, 20 + i * SOURCE_W, 20, "boiler")
        element["name"] = s.name
        elements.append(element)
    sources_w = 20 + len(sources) * SOURCE_W
    pipes = [(40 + i * SOURCE_W, 60, 40 + i * SOURCE_W, HEADER_Y + 60) for i in range(len(sources))]
    header_y = HEADER_Y + 60
    if main.flow_sensor_id:
        elements.append(
            _sensor_element("flow", "Main flow", main.flow_sensor, sources_w, header_y - 40)
        )
    store = getattr(main, "store", None)  # a missing one-to-one raises an AttributeError
    if store is not None:
        # The store on the header, showing its top temperature (its bottom in the reason).
        tank = _sensor_element("store", store.name, store.top_sensor, sources_w + 40, header_y + 40)
        tank["kind"] = "tank"
        elements.append(tank)
    zone_rows = zone_status(
        list(main.zones.select_related("temperature_sensor").prefetch_related("actuators"))
    )
    first_x = sources_w + 120
    width = max(700, first_x + len(zone_rows) * ZONE_W + 20)
    pipes.append((20, header_y, width - 20, header_y))
    for i, z in enumerate(zone_rows):
        x = first_x + i * ZONE_W + ZONE_W // 2
        pipes.append((x, header_y, x, header_y + 60))
        elements.append(zone_element(z, x, header_y + 60))
    return {"title": main.name, "width": width, "height": header_y + 180, "pipes": pipes,
            "elements": elements}  # fmt: skip
