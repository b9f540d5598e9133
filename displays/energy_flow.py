"""The site energy flow panel: generation by source -> the site's use -> grid in or out,
now and today (issue #28 item 8).

Laid out as the two screens visitors know do it: emoncms's My Solar app (use now, solar
now, import/export "balance" as big as the power figures) and Home Assistant's energy
distribution card (sources, home, grid in and out; self-sufficiency). Built from the site's
meters by role, given per feed in options.roles (all power feeds, W or kW):

- "generation": one source each (solar PV, hydro, wind…), named by options.labels;
- "grid": the grid connection's meter, import positive and export negative (an SDM630's
  total power), or "import" and "export" as two positive feeds;
- "use": the site's own consumption, when metered; else use = generation + import − export.

Today's kWh are the 5-minute means since local midnight summed (a missing window adds
nothing), import and export kept apart window by window, so a day that both bought in the
morning and sold at noon says both.
"""

from __future__ import annotations

from collections.abc import Sequence

from displays.models import Panel
from feeds.models import Feed
from feeds.store import service

ROLES = ("generation", "grid", "import", "export", "use")
WINDOW_S = 300
KW = {"kW": 1000.0, "MW": 1e6}


def _scale(feed: Feed) -> float:
    return KW.get(feed.unit or "", 1.0)


def _now_w(feed: Feed, last: dict, now: int, stale_s: float) -> float | None:
    t, value = last.get(feed.id, (None, None))
    if t is None or value is None or now - t > stale_s:
        return None  # an old reading is not "now"
    return float(value) * _scale(feed)


def _today_kwh(feed: Feed, clock) -> tuple[float, float]:
    """(kWh of the positive windows, kWh of the negative windows, as a positive number)."""
    start = clock.day_start()
    if clock.now <= start:
        return 0.0, 0.0
    rows = service.read(feed.id, start, clock.now, WINDOW_S, average=True, timezone=clock.tz_name)
    pos = neg = 0.0
    for _t, value in rows:
        if value is None:
            continue
        kwh = float(value) * _scale(feed) * WINDOW_S / 3_600_000
        if kwh >= 0:
            pos += kwh
        else:
            neg -= kwh
    return pos, neg


def _sum(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values)


def energy_flow(panel: Panel, feeds: Sequence[Feed], clock, last: dict) -> dict:
    options = panel.options if isinstance(panel.options, dict) else {}
    roles = options.get("roles") or {}
    labels = options.get("labels") or {}
    stale = options.get("stale_after_s", 900)
    by_role: dict[str, list[Feed]] = {r: [] for r in ROLES}
    for feed in feeds:
        role = roles.get(str(feed.id))
        if role in by_role:
            by_role[role].append(feed)
    sources = []
    for feed in by_role["generation"]:
        made, _used = _today_kwh(feed, clock)
        now_w = _now_w(feed, last, clock.now, stale)
        sources.append({"label": labels.get(str(feed.id)) or feed.name,
                        "now_w": None if now_w is None else max(0.0, now_w),
                        "today_kwh": round(made, 3)})  # fmt: skip
    sources.sort(key=lambda s: s["label"].casefold())  # a steady order, whatever is made now
    gen_now = _sum([s["now_w"] for s in sources]) if sources else 0.0
    gen_today = sum(s["today_kwh"] for s in sources)
    # the grid: one signed meter, or import and export apart
    imp_now: list[float | None] = []
    imp_today = exp_today = 0.0
    for feed in by_role["grid"]:
        imp_now.append(_now_w(feed, last, clock.now, stale))
        pos, neg = _today_kwh(feed, clock)
        imp_today, exp_today = imp_today + pos, exp_today + neg
    for feed in by_role["import"]:
        imp_now.append(_now_w(feed, last, clock.now, stale))
        imp_today += _today_kwh(feed, clock)[0]
    for feed in by_role["export"]:
        w = _now_w(feed, last, clock.now, stale)
        imp_now.append(None if w is None else -w)
        exp_today += _today_kwh(feed, clock)[0]
    grid_now = _sum(imp_now) if imp_now else None
    has_grid = bool(imp_now)
    if by_role["use"]:
        use_now = _sum([_now_w(f, last, clock.now, stale) for f in by_role["use"]])
        use_today = sum(_today_kwh(f, clock)[0] for f in by_role["use"])
        if not has_grid:  # the grid is what use and generation leave
            grid_now = None if use_now is None or gen_now is None else use_now - gen_now
            net = use_today - gen_today
            imp_today, exp_today = max(0.0, net), max(0.0, -net)
            has_grid = True
    else:
        use_now = None if gen_now is None or grid_now is None else gen_now + grid_now
        use_today = gen_today + imp_today - exp_today if has_grid else None
    # the share of today's use the site made itself (Home Assistant's self-sufficiency)
    own = None
    if use_today:
        own = max(0.0, min(100.0, 100.0 * (use_today - imp_today) / use_today))
    return {
        "sources": sources,
        "generation": {"now_w": gen_now, "today_kwh": round(gen_today, 3)},
        "use": {
            "now_w": use_now,
            "today_kwh": None if use_today is None else round(use_today, 3),
            "metered": bool(by_role["use"]),
        },  # fmt: skip
        "grid": None
        if not has_grid
        else {
            "now_w": grid_now,  # + importing, - exporting
            "import_today_kwh": round(imp_today, 3),
            "export_today_kwh": round(exp_today, 3),
        },
        "own_share_pct": None if own is None else round(own),
        "t": clock.now * 1000,
    }
