"""ensure_demo_displays: four ready-made displays from the demo site's feeds by role."""

from __future__ import annotations

import pytest

from demo.displays import ensure_demo_displays
from displays.models import Display, Panel
from feeds.models import Feed

pytestmark = pytest.mark.django_db


def test_it_creates_pv_thermal_and_hydro_with_public_feeds(demo_displays, role_feeds):
    assert sorted(demo_displays) == ["hydro", "pv", "site", "thermal"]
    assert demo_displays["pv"].title == "Solar PV"
    kinds = list(demo_displays["pv"].panels.values_list("kind", flat=True))
    assert kinds == ["live_value", "energy_today", "peak_today", "co2_saved", "chart_24h",
                     "daily_7"]  # fmt: skip
    temps = demo_displays["thermal"].panels.get(kind="temperatures")
    assert set(temps.feeds.all()) == {role_feeds["thermal_collector"], role_feeds["thermal_tank"]}
    assert temps.options["labels"][str(role_feeds["thermal_tank"].id)] == "Tank"
    assert all(Feed.objects.filter(id=f.id, public=True).exists() for f in role_feeds.values())
    for panel in Panel.objects.all():
        panel.full_clean()  # the demo's own options pass the admin's checks
    # a zero says why: the thermal panels read the circuit's two temperatures
    heat = demo_displays["thermal"].panels.get(kind="live_value")
    assert heat.options["explain_zero"] == "solar_thermal"
    assert heat.options["collector_feed"] == role_feeds["thermal_collector"].id
    assert heat.options["store_feed"] == role_feeds["thermal_tank"].id
    flow = demo_displays["site"].panels.get()
    assert flow.kind == "energy_flow"
    assert flow.options["roles"] == {
        str(role_feeds["pv_power"].id): "generation",
        str(role_feeds["hydro_power"].id): "generation",
        str(role_feeds["grid_power"].id): "grid",
    }


def test_it_is_idempotent(site, role_feeds, demo_displays):
    before = sorted(Panel.objects.values_list("display__slug", "order", "kind"))

    again = ensure_demo_displays(site, role_feeds)

    assert len(again) == 4
    assert Display.objects.count() == 4
    assert sorted(Panel.objects.values_list("display__slug", "order", "kind")) == before


def test_missing_roles_are_skipped(site, role_feeds):
    only_pv = {k: v for k, v in role_feeds.items() if k.startswith("pv_")}
    only_pv["thermal_tank"] = role_feeds["thermal_tank"]

    made = ensure_demo_displays(site, only_pv)

    assert [d.slug for d in made] == ["pv", "thermal", "site"]  # the flow of PV alone
    thermal = made[1]
    assert list(thermal.panels.values_list("kind", flat=True)) == ["temperatures", "chart_24h"]
    assert not Feed.objects.get(id=role_feeds["hydro_kwh"].id).public
