"""A week of made-up history for a brand-new demo site, so the kiosk's 24-hour charts, 7-day
bars and "energy today" have something to show on the first run.

Only when the PV power feed is still empty (a fresh site): the plant is stepped minute by
minute over the past days with the same physics the live simulator uses, the solar pump
switched by the control app's own differential strategy, and the points written straight to
the feed store with feeds.store.service.log_points (history has no node to post it; the live
simulator posts through the real interfaces from now on). Cumulative kWh feeds end at the
totals that power_to_kwh then carries on from. Room temperatures are not backfilled.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from django.conf import settings

from control import mapper
from control.engine.strategies import solar as solar_strategy
from control.models import SolarCircuit
from demo.plant import Coils, DemoPlant
from feeds.models import Feed
from feeds.store import service

log = logging.getLogger("demo")

STEP_S = 60
CHUNK = 20_000  # points per log_points call


def backfill(
    feeds_by_role: dict[str, Feed],
    days: int,
    now: float | None = None,
    seed: int | None = None,
) -> int:
    """Write `days` of history into the demo feeds if they are empty; return points written."""
    pv = feeds_by_role.get("pv_power")
    if days <= 0 or pv is None or service.last_value(pv.pk) is not None:
        return 0
    now = time.time() if now is None else now
    end = int(now) // STEP_S * STEP_S - STEP_S  # stop short of now: live posts carry on
    # Within the feed store's optional backfill bound (BMS_FEED_MAX_BACKFILL_DAYS, off by
    # default): older points would be refused and raise a "points refused" alarm on every
    # fresh demo. The first point is start + STEP_S.
    start = end - days * 86_400
    if settings.BMS_FEED_MAX_BACKFILL_DAYS:
        oldest = int(now) - settings.BMS_FEED_MAX_BACKFILL_DAYS * 86_400 + STEP_S
        start = max(start, oldest // STEP_S * STEP_S)
    plant = DemoPlant(datetime.fromtimestamp(start, UTC), seed=seed)
    # A circuit with the model's default settings, mapped as the live tick maps a real one.
    circuit = mapper.solar_spec(SolarCircuit(pk=0, name="history", pump_id=0))
    decision = None
    totals = {"pv_kwh": 0.0, "hydro_kwh": 0.0, "thermal_kwh": 0.0}
    ids = {role: feed.pk for role, feed in feeds_by_role.items()}
    points: list[tuple[int, int, float]] = []
    written = 0
    for t in range(start + STEP_S, end + 1, STEP_S):
        decision = solar_strategy.decide(
            circuit,
            plant.solar_thermal.collector_c,
            plant.solar_thermal.tank_c,
            decision.pump_on if decision else False,
            decision.emergency if decision else False,
            decision.antifreeze if decision else False,
            decision.tank_full if decision else False,
        )
        plant.step(datetime.fromtimestamp(t, UTC), STEP_S, 1.0, Coils(solar_pump=decision.pump_on))
        values = plant.http_values()
        heat = values["emontx-solarthermal"]["heat"]
        totals["pv_kwh"] += plant.pv_w * STEP_S / 3.6e6
        totals["hydro_kwh"] += plant.hydro_w * STEP_S / 3.6e6
        totals["thermal_kwh"] += heat * STEP_S / 3.6e6
        row = {
            "pv_power": plant.pv_w,
            "hydro_power": plant.hydro_w,
            "hydro_flow": plant.river.flow_l_s,
            "thermal_collector": plant.solar_thermal.collector_c,
            "thermal_tank": plant.solar_thermal.tank_c,
            "thermal_power": heat,
            **totals,
        }
        points.extend((ids[role], t, round(v, 4)) for role, v in row.items() if role in ids)
        if len(points) >= CHUNK:
            service.log_points(points)
            written += len(points)
            points = []
    if points:
        service.log_points(points)
        written += len(points)
    log.info("Backfilled %d days of history into the demo feeds (%d points)", days, written)
    return written
