"""What the kiosk layout, the zero reasons and the site energy flow compute (no browser):
rows with no empty cell, the sun at CAT, a reason only when there is one and never from a
private feed, the flow's use and grid from whichever meters the site has, options refused
with the key named."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from displays import kiosk_data, sun
from displays.kiosk_data import pack
from displays.models import Display, Panel
from tests.displays.conftest import write

pytestmark = pytest.mark.django_db

CAT = (52.62, -3.84)
WINTER_MORNING = int(datetime(2027, 1, 14, 10, 30, tzinfo=UTC).timestamp())
WINTER_EVENING = int(datetime(2027, 1, 14, 19, 0, tzinfo=UTC).timestamp())
WINTER_DAWN = int(datetime(2027, 1, 14, 6, 0, tzinfo=UTC).timestamp())


@pytest.mark.parametrize(
    ("spans", "most", "columns", "filled"),
    [
        ([1, 1, 1], 4, 3, [1, 1, 1]),  # the energy display: three columns, no black quarter
        ([1, 1, 1], 2, 2, [1, 1, 2]),  # portrait: the third panel takes the whole row
        ([1, 1, 1, 1, 2, 2], 4, 4, [1, 1, 1, 1, 2, 2]),  # PV: already full
        ([2, 1, 2], 4, 4, [2, 2, 4]),  # a two-wide panel that does not fit: rows closed
        ([4], 4, 4, [4]),  # the energy flow: a row of its own
        ([4], 2, 2, [2]),  # ... never wider than the grid
        ([], 4, 1, []),
    ],
)
def test_rows_never_end_in_an_empty_cell(spans, most, columns, filled):
    assert pack(spans, most) == (columns, filled)


def test_the_sun_at_cat():
    assert sun.is_up(*CAT, WINTER_MORNING)  # low, but up at 10:30 in January
    assert not sun.is_up(*CAT, WINTER_EVENING)
    assert not sun.is_up(*CAT, WINTER_DAWN)
    midsummer_noon = int(datetime(2027, 6, 21, 12, 15, tzinfo=UTC).timestamp())
    # 90 - 52.62 + 23.44 = 60.8 degrees at solar noon
    assert sun.elevation_deg(*CAT, midsummer_noon) == pytest.approx(60.8, abs=0.6)


@pytest.fixture
def cat(site):
    site.latitude, site.longitude = CAT
    site.save()
    return site


def _display(site, slug="thermal") -> Display:
    return Display.objects.create(site=site, slug=slug, title=slug, public=True)


def _panel_values(display: Display, now: int, public_only: bool = True) -> dict:
    data = kiosk_data.build(display, public_only=public_only, now=now)
    return {p["label"]: p for p in data["panels"]}


def test_a_zero_says_why_and_a_reading_does_not(cat, make_feed, redis_client):
    power = make_feed("heat", "W", public=True)
    collector = make_feed("collector", "°C", public=True)
    store = make_feed("store", "°C", public=True)
    d = _display(cat)
    p = Panel.objects.create(display=d, kind="live_value", label="Heat now", unit="W",
                             options={"explain_zero": "solar_thermal",
                                      "collector_feed": collector.id, "store_feed": store.id})  # fmt: skip
    p.feeds.set([power])
    for now, heat, coll, tank, why in (
        (WINTER_MORNING, 0.0, 8.0, 45.0,
         "Not running: collector (8 °C) cooler than the store (45 °C)"),
        (WINTER_MORNING + 600, 0.0, 48.0, 45.0,
         "Not running: collector only 3 °C warmer than the store; the pump starts at 6 °C"),
        (WINTER_MORNING + 1200, 850.0, 60.0, 45.0, None),  # running: nothing to explain
        (WINTER_EVENING, 0.0, 2.0, 45.0, "Not running: after sunset"),
        (WINTER_DAWN, 0.0, 2.0, 45.0, "Not running: before sunrise"),
    ):  # fmt: skip
        for feed, value in ((power, heat), (collector, coll), (store, tank)):
            write(feed, [(now - 30, value)], commit_at=now)
        assert _panel_values(d, now)["Heat now"].get("why") == why, now


def test_a_reason_never_reads_a_private_feed_for_the_public(cat, make_feed, redis_client):
    power = make_feed("heat", "W", public=True)
    collector = make_feed("collector", "°C", public=False)
    store = make_feed("store", "°C", public=True)
    d = _display(cat)
    p = Panel.objects.create(display=d, kind="live_value", label="Heat now", unit="W",
                             options={"explain_zero": "solar_thermal",
                                      "collector_feed": collector.id, "store_feed": store.id})  # fmt: skip
    p.feeds.set([power])
    for feed, value in ((power, 0.0), (collector, 8.0), (store, 45.0)):
        write(feed, [(WINTER_MORNING - 30, value)], commit_at=WINTER_MORNING)
    assert "why" not in _panel_values(d, WINTER_MORNING)["Heat now"]  # not said, not guessed
    staff = _panel_values(d, WINTER_MORNING, public_only=False)["Heat now"]
    assert staff["why"].startswith("Not running: collector (8 °C)")


def test_the_flow_finds_the_grid_from_use_when_there_is_no_grid_meter(site, make_feed,
                                                                      redis_client):  # fmt: skip
    pv = make_feed("pv", "kW", public=True)  # in kW: read as W x 1000
    use = make_feed("use", "W", public=True)
    d = _display(site, "site")
    p = Panel.objects.create(display=d, kind="energy_flow", label="Flow", unit="W",
                             options={"roles": {str(pv.id): "generation", str(use.id): "use"},
                                      "labels": {str(pv.id): "Solar PV"}})  # fmt: skip
    p.feeds.set([pv, use])
    midnight = int(datetime(2027, 1, 14, tzinfo=UTC).timestamp())
    write(pv, [(t, 1.0) for t in range(midnight, WINTER_MORNING - 59, 300)], WINTER_MORNING)
    write(use, [(t, 3000.0) for t in range(midnight, WINTER_MORNING - 59, 300)], WINTER_MORNING)
    flow = _panel_values(d, WINTER_MORNING)["Flow"]
    hours = (WINTER_MORNING - midnight) / 3600
    assert flow["sources"][0]["label"] == "Solar PV"
    assert flow["generation"]["now_w"] == pytest.approx(1000.0)
    assert flow["use"]["now_w"] == pytest.approx(3000.0) and flow["use"]["metered"]
    assert flow["grid"]["now_w"] == pytest.approx(2000.0)  # buying the difference
    assert flow["grid"]["import_today_kwh"] == pytest.approx(2.0 * hours, rel=0.02)
    assert flow["own_share_pct"] == 33  # a third of the use made on site


def test_an_old_reading_is_not_now(site, make_feed, redis_client):
    pv = make_feed("pv", "W", public=True)
    grid = make_feed("grid", "W", public=True)
    d = _display(site, "site")
    p = Panel.objects.create(display=d, kind="energy_flow", label="Flow", unit="W",
                             options={"roles": {str(pv.id): "generation", str(grid.id): "grid"}})  # fmt: skip
    p.feeds.set([pv, grid])
    write(pv, [(WINTER_MORNING - 3 * 3600, 500.0)], WINTER_MORNING)
    write(grid, [(WINTER_MORNING - 30, 200.0)], WINTER_MORNING)
    flow = _panel_values(d, WINTER_MORNING)["Flow"]
    assert flow["sources"][0]["now_w"] is None  # three hours old: shown as unknown, not 500 W
    assert flow["use"]["now_w"] is None


@pytest.mark.parametrize(
    ("kind", "options", "named"),
    [
        ("live_value", {"explain_zero": "moon"}, "options.explain_zero: one of sun, solar_thermal"),
        ("live_value", {"explain_zero": "solar_thermal"}, "options.collector_feed"),
        ("chart_24h", {"explain_zero": "sun"}, "options.explain_zero: only for"),
        ("energy_flow", {}, "options.roles"),
        ("energy_flow", {"roles": {"1": "sun"}}, "options.roles"),
        ("energy_flow", {"roles": {"1": "grid"}}, "at least one feed of role"),
    ],
)
def test_bad_options_are_a_400_naming_the_key(engineer_api, site, kind, options, named):
    d = _display(site, "x")
    r = engineer_api.post("/api/v1/panels", {"display": d.id, "kind": kind, "label": "P",
                                             "options": options}, format="json")  # fmt: skip
    assert r.status_code == 400
    assert named in json.dumps(r.json(), ensure_ascii=False)
    assert not Panel.objects.exists()


def test_good_options_are_saved_by_an_engineer_and_refused_to_a_viewer(
    engineer_api, viewer_api, site
):
    d = _display(site, "x")
    body = {"display": d.id, "kind": "live_value", "label": "PV now",
            "options": {"explain_zero": "sun"}}  # fmt: skip
    assert viewer_api.post("/api/v1/panels", body, format="json").status_code == 403
    r = engineer_api.post("/api/v1/panels", body, format="json")
    assert r.status_code == 201, r.content
    assert Panel.objects.get().options == {"explain_zero": "sun"}
