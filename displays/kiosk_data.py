"""The kiosk's JSON: a display, its panels and what each panel shows now.

Access rule (see docs/DISPLAYS.md): without login a display must be public, and of its
panels' feeds only those marked public are read; a logged-in user in a staff role group
(core/roles.py) or a superuser sees everything.
"""

from __future__ import annotations

import logging
import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from core.permissions import has_staff_role
from displays import building_panels, energy_flow, panel_data, zero_reason
from displays.models import Display, Panel
from displays.options import validate_options
from displays.zero_reason import ZERO
from feeds.models import Feed
from feeds.store import service
from feeds.store.phpfina import FeedError

log = logging.getLogger(__name__)
DEFAULT_GRID_G_PER_KWH = 207.0


def displays_with_panels():
    return Display.objects.select_related("site").prefetch_related("panels__feeds")


def can_view(display: Display, user) -> bool:
    return display.public or is_staff_reader(user)


def is_staff_reader(user) -> bool:
    """In a role group (or superuser), as for every staff page: not Django's `is_staff` flag,
    which stays set when a person's role is taken away."""
    return has_staff_role(user)


def visible_feeds(panel: Panel, public_only: bool) -> tuple[list[Feed], int]:
    """The panel's feeds this viewer may read, and how many were held back as private."""
    feeds = sorted(panel.feeds.all(), key=lambda f: (f.tag, f.name, f.id))
    shown = [f for f in feeds if f.public or not public_only]
    return shown, len(feeds) - len(shown)


def clock_for(display: Display, now: float | None = None) -> panel_data.Clock:
    site = display.site
    tz_name = site.time_zone if site else settings.TIME_ZONE
    try:
        ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        log.warning("display %s: unknown time zone %r, using %s", display.slug, tz_name,
                    settings.TIME_ZONE)  # fmt: skip
        tz_name = settings.TIME_ZONE
    grid = site.grid_intensity_g_per_kwh if site else DEFAULT_GRID_G_PER_KWH
    return panel_data.Clock(int(time.time() if now is None else now), tz_name, grid)


def panel_definition(panel: Panel, feeds: list[Feed]) -> dict:
    """The unchanging part of a panel: what the page lays out once."""
    options = panel.options if isinstance(panel.options, dict) else {}
    span = options.get("span")
    stale_after = options.get("stale_after_s")
    return {
        "id": panel.id,
        "kind": panel.kind,
        "label": panel.label,
        "unit": panel.unit,
        "colour": panel.colour,
        "span": span if span in (1, 2) else panel_data.default_span(panel.kind),
        "chart": panel.kind in panel_data.CHART_KINDS,
        # A reading older than this is flagged on screen (the sensor, not the page, is stale).
        "stale_after_s": stale_after if isinstance(stale_after, int | float) else 900,
        "items": [
            {"feed": f.id, "label": panel_data.feed_label(panel, f), "unit": f.unit or panel.unit}
            for f in feeds
        ]
        if panel.kind in panel_data.MULTI_KINDS
        else [],
    }


def panel_values(
    panel: Panel,
    feeds: list[Feed],
    hidden: int,
    clock,
    last: dict,
    *,
    site=None,
    public_only: bool = True,
) -> dict:
    """What the panel shows now, with the reason a zero is zero when the panel asks for one
    (displays/zero_reason.py); a problem in one panel is reported in it, not raised."""
    values = _values(panel, feeds, hidden, clock, last)
    value = values.get("value")
    options = panel.options if isinstance(panel.options, dict) else {}
    if options.get("explain_zero") and isinstance(value, int | float) and abs(value) < ZERO:
        why = zero_reason.reason(options, site, clock.now, last, public_only)
        if why:
            values["why"] = why
    return values


def _values(panel: Panel, feeds: list[Feed], hidden: int, clock, last: dict) -> dict:
    problems = validate_options(panel.kind, panel.options)
    if problems:
        return {"error": "Panel options need fixing: " + " ".join(problems)}
    if panel.kind in building_panels.KINDS:  # figures of the energy app, no feeds of its own
        try:
            return building_panels.KINDS[panel.kind](panel, clock.now)
        except (FeedError, OSError) as exc:
            log.warning("display panel %s (%s): %s", panel.id, panel.kind, exc)
            return {"error": "Energy data unavailable"}
    if panel.kind == Panel.Kind.ENERGY_FLOW and feeds:
        try:
            return energy_flow.energy_flow(panel, feeds, clock, last)
        except (FeedError, OSError) as exc:
            log.warning("display panel %s (%s): %s", panel.id, panel.kind, exc)
            return {"error": f"Feed data unavailable: {exc}"}
    if not feeds:
        reason = "Feed not public" if hidden else "No feed attached"
        return {"error": reason}
    try:
        return panel_data.KINDS[panel.kind](panel, feeds, clock, last)
    except (FeedError, OSError) as exc:
        # A damaged or missing feed file must not blank the whole screen: log it, show it.
        log.warning("display panel %s (%s): %s", panel.id, panel.kind, exc)
        return {"error": f"Feed data unavailable: {exc}"}


WIDE_COLUMNS = 4  # landscape, e.g. 1920x1080
TALL_COLUMNS = 2  # portrait, e.g. 1080x1920


def pack(spans: list[int], most: int) -> tuple[int, list[int]]:
    """(columns, span of each panel) so no row ends in an empty cell: the grid is as wide as
    the panels need (three one-cell panels: three columns, not four with a black quarter),
    and a panel followed by one that does not fit beside it stretches to the row's end."""
    spans = [max(1, min(s, most)) for s in spans]
    columns = max(1, min(most, sum(spans)))
    out: list[int] = []
    used = 0
    for span in spans:
        span = min(span, columns)
        if used + span > columns:
            out[-1] += columns - used  # the row's last panel takes the cells left
            used = 0
        out.append(span)
        used = (used + span) % columns
    if out and used:
        out[-1] += columns - used
    return columns, out


def describe(display: Display, public_only: bool) -> dict:
    """The layout of a display, without values (rendered into the page)."""
    panels = []
    for panel in display.panels.all():
        feeds, _hidden = visible_feeds(panel, public_only)
        panels.append(panel_definition(panel, feeds))
    wide, wide_spans = pack([p["span"] for p in panels], WIDE_COLUMNS)
    tall, tall_spans = pack([p["span"] for p in panels], TALL_COLUMNS)
    for p, w, t in zip(panels, wide_spans, tall_spans, strict=True):
        p["fill"] = {"wide": w, "tall": t}
    site = display.site
    return {
        "slug": display.slug,
        "title": display.title,
        "theme": display.theme,
        "refresh_s": display.refresh_s,
        "rotate_s": display.rotate_s,
        "site": site.name if site else "",
        "time_zone": clock_for(display).tz_name,
        "columns": {"wide": wide, "tall": tall},
        "panels": panels,
    }


def build(display: Display, *, public_only: bool, now: float | None = None) -> dict:
    """The whole data.json for one display at `now`."""
    clock = clock_for(display, now)
    per_panel = []
    feed_ids: set[int] = set()
    for panel in display.panels.all():
        feeds, hidden = visible_feeds(panel, public_only)
        per_panel.append((panel, feeds, hidden))
        feed_ids.update(f.id for f in feeds)
        options = panel.options if isinstance(panel.options, dict) else {}
        for key in ("collector_feed", "store_feed"):  # what a zero's reason reads
            if isinstance(options.get(key), int) and not isinstance(options.get(key), bool):
                feed_ids.add(options[key])
    # One Redis round trip for every live value on the screen.
    last = service.last_values(feed_ids) if feed_ids else {}
    panels = []
    for panel, feeds, hidden in per_panel:
        entry = panel_definition(panel, feeds)
        entry.update(panel_values(panel, feeds, hidden, clock, last, site=display.site,
                                  public_only=public_only))  # fmt: skip
        panels.append(entry)
    return {
        "display": {
            "slug": display.slug,
            "title": display.title,
            "theme": display.theme,
            "refresh_s": display.refresh_s,
        },
        "site": display.site.name if display.site else "",
        "time_zone": clock.tz_name,
        "now": clock.now * 1000,
        "day_start": clock.day_start() * 1000,
        "panels": panels,
    }
