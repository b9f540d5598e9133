"""What each heat main is doing, for the control status page: its flow against the set point,
its sources in sequence (lead first) with each one's relay state, run hours and reason.

Read from what the last control tick stored (the strategy memory `heatmain:<id>` and the
actuators' runtime state, control/runtime.py), so the page never waits on a relay board."""

from __future__ import annotations

from typing import Any

from control import runtime
from control.engine.specs import ANTI_SHORT_CYCLE
from control.models import HeatMain, ThermalStore
from control.status import actuator_status
from feeds.store import service as feed_service


def heat_main_rows() -> list[dict[str, Any]]:
    mains = list(
        HeatMain.objects.select_related(
            "flow_sensor", "store__top_sensor", "store__bottom_sensor"
        ).prefetch_related("sources__actuator")
    )
    if not mains:
        return []
    memory = runtime.load_memory()
    stores = {m.pk: _store(m) for m in mains}
    feed_ids = [m.flow_sensor.feed_id for m in mains if m.flow_sensor and m.flow_sensor.feed_id]
    for t in stores.values():
        if t is not None:
            feed_ids += [t.top_sensor.feed_id, t.bottom_sensor.feed_id]
    last = feed_service.last_values([f for f in feed_ids if f])
    acts = [s.actuator for m in mains for s in m.sources.all()]
    acts += [
        p for t in stores.values() if t is not None for p in (t.charge_pump, t.discharge_pump) if p
    ]
    states = {row["id"]: row for row in actuator_status(acts)}
    rows = []
    for m in mains:
        mem = memory.get(f"heatmain:{m.pk}") or {}
        sources = {s.pk: s for s in m.sources.all()}
        order = [sid for sid in mem.get("order", []) if sid in sources]
        order += [sid for sid in sources if sid not in order]
        hours = mem.get("hours") or {}
        flow = last.get(m.flow_sensor.feed_id) if m.flow_sensor else None
        rows.append(
            {
                "id": m.pk,
                "name": m.name,
                "enabled": m.enabled,
                "flow_c": flow[1] if flow else None,
                "setpoint_c": m.flow_setpoint_c,
                "stages": mem.get("stages", 0),
                "running": running_words(
                    [sources[sid].actuator for sid in order],
                    [states[sources[sid].actuator_id] for sid in order],
                ),
                "store": _store_row(stores[m.pk], memory, last, states),
                "sources": [
                    {
                        "name": sources[sid].name,
                        "role": "lead" if i == 0 else f"lag {i}",
                        "hours": hours.get(str(sid), 0.0) / 3600,
                        "state": states[sources[sid].actuator_id],
                    }
                    for i, sid in enumerate(order)
                ],
            }
        )
    return rows


def running_words(actuators: list, rows: list[dict[str, Any]]) -> str:
    """How many sources run, from their relays' states, not the stages called: a source held
    on by its minimum run after the call ended runs too, and is said to ("1 running (held by
    its 2 h minimum run)"), so the page never says 0 beside a relay that is ON."""
    on = [(a, r) for a, r in zip(actuators, rows, strict=True) if r["state"] == "ON"]
    held = [a for a, r in on if r.get("strategy") == ANTI_SHORT_CYCLE]
    words = f"{len(on)} running"
    if len(held) == 1:
        words += f" (held by its {_duration(held[0].min_on_s)} minimum run)"
    elif held:
        words += f" ({len(held)} held by their minimum run)"
    return words


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{round(seconds / 60)} min"


def _store(main: HeatMain) -> ThermalStore | None:
    try:
        return main.store
    except ThermalStore.DoesNotExist:
        return None


def _store_row(
    t: ThermalStore | None, memory: dict, last: dict, states: dict
) -> dict[str, Any] | None:
    """The store's top and bottom, whether it is charging, and its pumps."""
    if t is None:
        return None
    top, bottom = last.get(t.top_sensor.feed_id), last.get(t.bottom_sensor.feed_id)
    return {
        "name": t.name,
        "top_c": top[1] if top else None,
        "bottom_c": bottom[1] if bottom else None,
        "charging": bool(memory.get(f"store:{t.pk}:charging")),
        "charge_start_c": t.charge_start_c,
        "charge_stop_c": t.charge_stop_c,
        "discharge_min_c": t.discharge_min_c,
        "pumps": [states[p.pk] for p in (t.charge_pump, t.discharge_pump) if p],
    }
