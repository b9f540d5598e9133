"""The ready-made displays of the demo site: Solar PV, Solar thermal, Hydro and Site energy.

`simulate_site` calls ensure_demo_displays(site, feeds) with the demo's feeds by role
(demo/). Safe to call again: displays and panels are updated, not duplicated,
and a panel whose feeds are all missing is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from displays.models import Display, Panel
from displays.options import ZERO_KEYS
from feeds.models import Feed
from sensors.models import Site

PV_YELLOW = "#f5c400"
THERMAL_ORANGE = "#ff7a1a"
TANK_RED = "#ff4d6d"
HYDRO_BLUE = "#2fa8ff"
LEAF_GREEN = "#3ddc84"


@dataclass(frozen=True)
class PanelSpec:
    kind: str
    label: str
    roles: tuple[str, ...]
    unit: str = ""
    colour: str = PV_YELLOW
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DisplaySpec:
    slug: str
    title: str
    panels: tuple[PanelSpec, ...]
    refresh_s: int = 15


K = Panel.Kind
DEMO_DISPLAYS = (
    DisplaySpec("pv", "Solar PV", (
        PanelSpec(K.LIVE_VALUE, "Generating now", ("pv_power",), "W",
                  options={"explain_zero": "sun"}),
        PanelSpec(K.ENERGY_TODAY, "Energy today", ("pv_kwh",), "kWh"),
        PanelSpec(K.PEAK_TODAY, "Peak today", ("pv_power",), "W"),
        PanelSpec(K.CO2_SAVED, "CO₂ saved today", ("pv_kwh",), "kg", LEAF_GREEN),
        PanelSpec(K.CHART_24H, "Last 24 hours", ("pv_power",), "W"),
        PanelSpec(K.DAILY_7, "Last 7 days", ("pv_kwh",), "kWh"),
    )),
    DisplaySpec("thermal", "Solar thermal", (
        PanelSpec(K.TEMPERATURES, "Temperatures", ("thermal_collector", "thermal_tank"), "°C",
                  THERMAL_ORANGE),
        PanelSpec(K.LIVE_VALUE, "Heat now", ("thermal_power",), "W", THERMAL_ORANGE,
                  {"explain_zero": "solar_thermal"}),
        PanelSpec(K.ENERGY_TODAY, "Heat today", ("thermal_kwh",), "kWh", THERMAL_ORANGE,
                  {"explain_zero": "solar_thermal"}),
        PanelSpec(K.CHART_24H, "Temperatures, last 24 hours",
                  ("thermal_collector", "thermal_tank"), "°C", THERMAL_ORANGE),
        PanelSpec(K.DAILY_7, "Heat, last 7 days", ("thermal_kwh",), "kWh", THERMAL_ORANGE),
    )),
    DisplaySpec("hydro", "Hydro", (
        PanelSpec(K.HYDRO, "River turbine", ("hydro_flow", "hydro_power"), "", HYDRO_BLUE),
        PanelSpec(K.ENERGY_TODAY, "Energy today", ("hydro_kwh",), "kWh", HYDRO_BLUE),
        PanelSpec(K.CO2_SAVED, "CO₂ saved, 30 days", ("hydro_kwh",), "kg", LEAF_GREEN,
                  {"period": "30d"}),
        PanelSpec(K.CHART_24H, "Output, last 24 hours", ("hydro_power",), "W", HYDRO_BLUE),
        PanelSpec(K.DAILY_30, "Last 30 days", ("hydro_kwh",), "kWh", HYDRO_BLUE),
    )),
    # The whole site: what it makes, what it uses, what goes to and from the grid.
    DisplaySpec("site", "Site energy", (
        PanelSpec(K.ENERGY_FLOW, "Electricity now and today",
                  ("pv_power", "hydro_power", "grid_power"), "W", LEAF_GREEN),
    )),
)  # fmt: skip

# The energy flow's roles (displays/energy_flow.py) and its sources' names.
FLOW_ROLES = {"pv_power": "generation", "hydro_power": "generation", "grid_power": "grid"}
FLOW_LABELS = {"pv_power": "Solar PV", "hydro_power": "Hydro", "grid_power": "Grid"}

# Friendlier names than the feeds' own for the multi-value panels.
ROLE_LABELS = {
    "thermal_collector": "Collector",
    "thermal_tank": "Tank",
    "hydro_flow": "Flow",
    "hydro_power": "Output",
}


def _panel_options(
    spec: PanelSpec, feeds: list[tuple[str, Feed]], site_feeds: dict[str, Feed]
) -> dict:
    options = dict(spec.options)
    if options.get("explain_zero") == "solar_thermal":
        # "Not running: collector cooler than the store" reads the circuit's two temperatures
        for key, role in (("collector_feed", "thermal_collector"), ("store_feed", "thermal_tank")):
            if site_feeds.get(role):
                options[key] = site_feeds[role].id
        if "collector_feed" not in options or "store_feed" not in options:
            options = {k: v for k, v in options.items() if k not in ZERO_KEYS}
    if spec.kind == K.ENERGY_FLOW:
        options["roles"] = {str(feed.id): FLOW_ROLES[role] for role, feed in feeds}
        options["labels"] = {str(feed.id): FLOW_LABELS[role] for role, feed in feeds}
        return options
    labels = {str(feed.id): ROLE_LABELS[role] for role, feed in feeds if role in ROLE_LABELS}
    if labels:
        options["labels"] = labels
    if spec.kind in (K.TEMPERATURES, K.CHART_24H) and len(feeds) > 1:
        # Collector warm orange, tank red: the two lines must be told apart from afar.
        palette = (spec.colour, TANK_RED)
        options["colours"] = {str(feed.id): palette[i % 2] for i, (_r, feed) in enumerate(feeds)}
    return options


@transaction.atomic
def ensure_demo_displays(site: Site | None, feeds: dict[str, Feed]) -> list[Display]:
    """Create or update the "pv", "thermal", "hydro" and "site" displays from feeds by role
    (a display whose feeds are all missing is left out; the site flow needs a generation
    feed)."""
    made = []
    for spec in DEMO_DISPLAYS:
        wanted = [(p, [(r, feeds[r]) for r in p.roles if feeds.get(r)]) for p in spec.panels]
        wanted = [(p, found) for p, found in wanted if found]
        wanted = [
            (p, found) for p, found in wanted
            if p.kind != K.ENERGY_FLOW or any(FLOW_ROLES[r] == "generation" for r, _f in found)
        ]  # fmt: skip
        if not wanted:
            continue  # none of this display's feeds exist on the site
        display, _created = Display.objects.update_or_create(
            slug=spec.slug,
            defaults={
                "title": spec.title,
                "site": site,
                "refresh_s": spec.refresh_s,
                "public": True,
            },
        )
        keep = []
        for order, (pspec, found) in enumerate(wanted):
            panel, _ = Panel.objects.update_or_create(
                display=display,
                order=order,
                defaults={
                    "kind": pspec.kind,
                    "label": pspec.label,
                    "unit": pspec.unit,
                    "colour": pspec.colour,
                    "options": _panel_options(pspec, found, feeds),
                },
            )
            panel.feeds.set([feed for _role, feed in found])
            keep.append(panel.id)
            # A feed on a public display is readable without login, by design: say so on the feed.
            Feed.objects.filter(id__in=[f.id for _r, f in found], public=False).update(public=True)
        display.panels.exclude(id__in=keep).delete()
        made.append(display)
    return made


@transaction.atomic
def ensure_energy_display(site: Site, building_id: int, building_name: str) -> Display:
    """The "energy" display: one building's energy today against its model, and the CO₂ it
    saved against the model over 30 days and 12 months (the demo's Lecture block)."""
    display, _created = Display.objects.update_or_create(
        slug="energy",
        defaults={"title": f"{building_name}: energy", "site": site, "refresh_s": 60,
                  "public": True},
    )  # fmt: skip
    specs = (
        (K.BUILDING_TODAY, f"{building_name} today", "#4fd1ff", {}),
        (K.BUILDING_SAVED, "CO₂ saved, 30 days", LEAF_GREEN, {"period": "30d"}),
        (K.BUILDING_SAVED, "CO₂ saved, 12 months", LEAF_GREEN, {"period": "365d"}),
    )
    keep = []
    for order, (kind, label, colour, options) in enumerate(specs):
        panel, _ = Panel.objects.update_or_create(
            display=display, order=order,
            defaults={"kind": kind, "label": label, "colour": colour, "unit": "",
                      "options": {"building": building_id, **options}},
        )  # fmt: skip
        keep.append(panel.id)
    display.panels.exclude(id__in=keep).delete()
    return display
