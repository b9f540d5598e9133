"""Plant schematics: a heating plant or solar circuit drawn from its configuration, so the
picture cannot disagree with what control drives.

    from control.schematic import plant_schematic, solar_schematic
    plant_schematic(plant) -> {"width", "height", "elements": [...], "pipes": [...]}

Each element has a position on an SVG canvas, its live state (from what the last control tick
stored, control/status.py, and the feeds' last values) and its "why": the last decision's
reason and, for actuators, the recent commands from the ActuatorCommand audit log. The
template (control/templates/control/_schematic_live.html) only draws what this returns.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from control.models import ActuatorCommand, HeatingPlant, SolarCircuit
from control.status import actuator_status, zone_status
from feeds.store import service as feed_service
from sensors.models import Sensor

RECENT_COMMANDS = 8  # per actuator, newest first
ZONE_W = 150  # px per zone column
ZONE_H = 100  # a zone's box: name, temperature, what it does, its target
HEADER_Y = 70  # the flow header pipe

# Each kind's drawn box (left, top, width, height) from its (x, y), as the template draws it
# (control/templates/control/_schematic_live.html): layouts and their tests use these, so a
# drawing can be checked for overlaps without a browser.
BOXES: dict[str, tuple[float, float, float, float]] = {
    "boiler": (0, 0, 140, 80),
    "pump": (-50, -24, 100, 84),
    "valve": (-18, -18, 150, 36),
    "sensor": (0, 0, 120, 50),
    "tank": (0, 0, 120, 200),
    "collector": (0, 0, 160, 90),
}


def element_box(e: dict[str, Any]) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of an element on the canvas."""
    if e["kind"] == "zone":
        dx, dy, w, h = 0, 0, e["w"], ZONE_H
    else:
        dx, dy, w, h = BOXES[e["kind"]]
    left, top = e["x"] + dx, e["y"] + dy
    return left, top, left + w, top + h


def _commands(actuator_ids: list[int]) -> dict[int, list[ActuatorCommand]]:
    """The newest RECENT_COMMANDS audit rows per actuator (one query per actuator, indexed)."""
    out: dict[int, list[ActuatorCommand]] = {}
    for pk in actuator_ids:
        out[pk] = list(
            ActuatorCommand.objects.filter(actuator_id=pk)
            .select_related("user")
            .order_by("-requested_at")[:RECENT_COMMANDS]
        )
    return out


def _state_class(row: dict[str, Any]) -> str:
    if row.get("fault"):
        return "fault"
    return {"ON": "on", "OFF": "off"}.get(row.get("state", ""), "unknown")


def _actuator_element(row: dict, commands: dict, x: float, y: float, shape: str) -> dict:
    return {
        "key": f"actuator-{row['id']}",
        "kind": shape,
        "x": x,
        "y": y,
        "name": row["name"],
        "state": row["state"],
        "css": _state_class(row),
        "why": row["why"],
        "owner": row["owner"],
        "since": row["since"],
        "fault": row["fault"],
        "commands": commands.get(row["id"], []),
    }


def _sensor_element(key: str, label: str, sensor: Sensor | None, x: float, y: float) -> dict:
    reading = None
    if sensor is not None and sensor.feed_id:
        reading = feed_service.last_values([sensor.feed_id]).get(sensor.feed_id)
    value = reading[1] if reading else None
    return {
        "key": key,
        "kind": "sensor",
        "x": x,
        "y": y,
        "name": label,
        "value": value,
        "css": "unknown" if value is None else "sensor",
        "why": (
            f"{sensor} read {value:.1f} °C"
            if value is not None
            else f"{sensor or 'No sensor'}: no reading yet"
        ),
        "reading_at": datetime.fromtimestamp(reading[0], UTC) if reading else None,
        "commands": [],
    }


def zone_element(z: dict[str, Any], x: float, y: float) -> dict[str, Any]:
    """A zone's box under its pipe: temperature, target, why (from control.status.zone_status)."""
    return {
        "key": f"zone-{z['id']}",
        "kind": "zone",
        "x": x - (ZONE_W - 14) / 2,
        "y": y,
        "w": ZONE_W - 14,
        "name": z["name"],
        "slug": z["slug"],
        "value": z["temperature"],
        "target": z["target"],
        "mode": z["mode"],
        "mode_words": z["mode_words"],
        "css": "fault" if z["fault"] else ("on" if z["demand"] else "off"),
        "why": z["reason"],
        "flags": z["flag_labels"],
        "commands": [],
    }


def plant_schematic(plant: HeatingPlant) -> dict[str, Any]:
    """Boiler and pump on the flow header; each zone a branch with its valves and its room."""
    zones = list(plant.zones.select_related("temperature_sensor").prefetch_related("actuators"))
    zone_rows = zone_status(zones)
    plant_actuators = [plant.boiler] + ([plant.pump] if plant.pump else [])
    rows = {r["id"]: r for r in actuator_status(plant_actuators)}
    for z in zone_rows:
        rows.update({a["id"]: a for a in z["actuators"]})
    commands = _commands(list(rows))
    elements = [_actuator_element(rows[plant.boiler_id], commands, 20, 30, "boiler")]
    if plant.pump:
        elements.append(_actuator_element(rows[plant.pump_id], commands, 215, HEADER_Y, "pump"))
    if plant.outside_sensor_id:
        elements.append(_sensor_element("outside", "Outside", plant.outside_sensor, 20, 150))
    pipes = []
    first_x = 320
    width = max(700, first_x + len(zone_rows) * ZONE_W + 20)
    pipes.append((160, HEADER_Y, width - 20, HEADER_Y))
    height = 280 if plant.outside_sensor_id else 260
    for i, z in enumerate(zone_rows):
        x = first_x + i * ZONE_W + ZONE_W // 2
        valves = [a for a in z["actuators"] if a["id"] not in (plant.boiler_id, plant.pump_id)]
        y = HEADER_Y + 60
        for a in valves:
            shape = "pump" if a["actuator"].kind == "pump" else "valve"
            elements.append(_actuator_element(a, commands, x, y, shape))
            y += 60
        pipes.append((x, HEADER_Y, x, y))
        elements.append(zone_element(z, x, y))
        height = max(height, y + ZONE_H + 20)
    return {"title": plant.name, "width": width, "height": height, "pipes": pipes,
            "elements": elements}  # fmt: skip


def solar_schematic(circuit: SolarCircuit) -> dict[str, Any]:
    """Collector on the roof, the tank, the pump on the return between them."""
    rows = {r["id"]: r for r in actuator_status([circuit.pump])}
    commands = _commands(list(rows))
    collector = _sensor_element("collector", "Collector", circuit.collector_sensor, 40, 40)
    tank = _sensor_element("tank", "Tank", circuit.tank_sensor, 480, 60)
    collector["kind"], tank["kind"] = "collector", "tank"
    pump = _actuator_element(rows[circuit.pump_id], commands, 300, 240, "pump")
    delta = None
    if collector["value"] is not None and tank["value"] is not None:
        delta = collector["value"] - tank["value"]
    pipes = [(200, 70, 480, 70), (120, 130, 120, 240), (120, 240, 480, 240)]
    return {
        "title": circuit.name,
        "width": 700,
        "height": 320,
        "pipes": pipes,
        "elements": [collector, tank, pump],
        "delta": delta,
        "delta_on": circuit.delta_on,
        "delta_off": circuit.delta_off,
    }
