"""What each heat main is doing, for the control status page: its flow against the set point,
its sources in sequence (lead first) with each one's relay state, run hours and reason.

Read from what the last control tick stored (the strategy memory `heatmain:<id>` and the
actuators' runtime state, control/runtime.py), so the page never waits on a relay board."""

from __future__ import annotations

from typing import Any

from control import runtime
from control.models import HeatMain
from control.status import actuator_status
from feeds.store import service as feed_service


def heat_main_rows() -> list[dict[str, Any]]:
    mains = list(
        HeatMain.objects.select_related("flow_sensor").prefetch_related("sources__actuator")
    )
    if not mains:
        return []
    memory = runtime.load_memory()
    feed_ids = [m.flow_sensor.feed_id for m in mains if m.flow_sensor and m.flow_sensor.feed_id]
    last = feed_service.last_values(feed_ids)
    acts = [s.actuator for m in mains for s in m.sources.all()]
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
