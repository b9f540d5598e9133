"""Values on the kiosk for feeds with known data, including both DST days in Europe/London."""

from __future__ import annotations

import pytest

from displays import kiosk_data
from displays.models import Display, Panel
from tests.displays.conftest import cumulative, local, write

pytestmark = pytest.mark.django_db


def panel_of(data: dict, kind: str) -> dict:
    (panel,) = [p for p in data["panels"] if p["kind"] == kind]
    return panel


@pytest.fixture
def meter(site, make_feed, redis_client):
    """A public display with an energy-today and a 7-day panel over one cumulative kWh feed."""
    feed = make_feed("meter", "kWh", interval=600, public=True)
    display = Display.objects.create(site=site, slug="meter", title="Meter")
    for order, kind in enumerate([Panel.Kind.ENERGY_TODAY, Panel.Kind.DAILY_7]):
        panel = Panel.objects.create(display=display, kind=kind, label=kind, order=order)
        panel.feeds.add(feed)
    return display, feed


def test_energy_today_counts_25_hours_on_the_autumn_dst_day(meter):
    display, feed = meter
    now = local(2026, 10, 25, 23, 30)  # clocks went back at 02:00 BST: a 25-hour day
    write(feed, cumulative(local(2026, 10, 24, 0, 0), now, 600, kwh_per_hour=1.0))

    data = kiosk_data.build(display, public_only=True, now=now)

    # The feed store's daily delta: the day's last reading minus the last one before local
    # midnight (23:50 BST). 23:50 BST to 23:30 GMT is 24 h 40 min at 1 kWh/h; a day taken as
    # 24 h of UTC, or from midnight GMT, would be an hour short.
    midnight = local(2026, 10, 25, 0, 0)
    assert midnight == local(2026, 10, 24, 0, 0) + 24 * 3600
    assert panel_of(data, "energy_today")["value"] == pytest.approx((now - midnight + 600) / 3600)
    assert panel_of(data, "energy_today")["value"] == pytest.approx(24.5 + 1 / 6)
    assert data["day_start"] == midnight * 1000


def test_energy_today_counts_23_hours_on_the_spring_dst_day(meter):
    display, feed = meter
    now = local(2026, 3, 29, 23, 30)  # clocks went forward at 01:00 GMT: a 23-hour day
    write(feed, cumulative(local(2026, 3, 28, 0, 0), now, 600, kwh_per_hour=1.0))

    data = kiosk_data.build(display, public_only=True, now=now)

    assert panel_of(data, "energy_today")["value"] == pytest.approx(22.5 + 1 / 6)


def test_daily_bars_start_at_local_midnight_and_hold_each_days_energy(meter):
    display, feed = meter
    now = local(2026, 10, 27, 12, 0)
    write(feed, cumulative(local(2026, 10, 20, 0, 0), now, 600, kwh_per_hour=2.0))

    bars = panel_of(kiosk_data.build(display, public_only=True, now=now), "daily_7")["bars"]

    days = [t for t, _v in bars]
    assert days == [local(2026, 10, d, 0, 0) * 1000 for d in range(21, 28)]
    kwh = dict(bars)
    assert kwh[local(2026, 10, 24, 0, 0) * 1000] == pytest.approx(48.0)
    assert kwh[local(2026, 10, 25, 0, 0) * 1000] == pytest.approx(50.0)  # the 25-hour day
    assert kwh[local(2026, 10, 26, 0, 0) * 1000] == pytest.approx(48.0)
    # Today so far: noon minus yesterday's last reading (23:50), 12 h 10 min at 2 kWh/h.
    assert kwh[local(2026, 10, 27, 0, 0) * 1000] == pytest.approx(24.0 + 1 / 3)


def test_days_without_data_are_gaps_not_zeros(meter):
    display, feed = meter
    now = local(2026, 6, 10, 12, 0)
    write(feed, cumulative(local(2026, 6, 9, 0, 0), now, 600, kwh_per_hour=1.0))

    bars = panel_of(kiosk_data.build(display, public_only=True, now=now), "daily_7")["bars"]

    # The first day with data has no reading before it to subtract: a gap too, not a guess.
    assert [v for _t, v in bars[:6]] == [None] * 6
    assert bars[-1][1] == pytest.approx(12.0 + 1 / 6)


@pytest.fixture
def pv(site, make_feed, redis_client):
    """A PV power feed (a triangle peaking at 3000 W at 13:00) and its cumulative kWh feed."""
    power = make_feed("pv power", "W", interval=60, public=True)
    energy = make_feed("pv kwh", "kWh", interval=60, public=True)
    display = Display.objects.create(site=site, slug="pv-test", title="PV")
    kinds = ["live_value", "peak_today", "chart_24h", "co2_saved", "energy_today"]
    for order, kind in enumerate(kinds):
        panel = Panel.objects.create(display=display, kind=kind, label=kind, order=order)
        panel.feeds.add(energy if kind in ("co2_saved", "energy_today") else power)
    return display, power, energy


def triangle(t: int, peak_at: int, peak_w: float, half_width: int) -> float:
    return max(0.0, peak_w * (1 - abs(t - peak_at) / half_width))


def test_live_value_peak_chart_and_co2_from_known_pv_data(pv):
    display, power, energy = pv
    now = local(2026, 7, 1, 16, 0)
    start = local(2026, 7, 1, 0, 0)
    peak_at = local(2026, 7, 1, 13, 0)
    points = [(t, triangle(t, peak_at, 3000.0, 6 * 3600)) for t in range(start, now + 1, 60)]
    write(power, points)
    write(energy, cumulative(start - 3600, now, 60, kwh_per_hour=1.5))
    kwh_today = 1.5 * (now - (start - 60)) / 3600  # since the last reading before midnight

    data = kiosk_data.build(display, public_only=True, now=now)

    live = panel_of(data, "live_value")
    assert live["value"] == pytest.approx(triangle(now, peak_at, 3000.0, 6 * 3600))  # 1500 W
    assert live["t"] == now * 1000
    peak = panel_of(data, "peak_today")
    assert peak["value"] == pytest.approx(3000.0)
    assert peak["t"] == peak_at * 1000
    chart = panel_of(data, "chart_24h")
    assert chart["end"] - chart["start"] == 86400 * 1000
    (series,) = chart["series"]
    values = [v for _t, v in series["points"] if v is not None]
    assert 0 < max(values) <= 3000.0
    assert len(series["points"]) == pytest.approx(288, abs=2)  # 5-minute averages
    co2 = panel_of(data, "co2_saved")
    assert co2["kwh"] == pytest.approx(kwh_today)  # 16 h 1 min at 1.5 kWh/h
    assert co2["grid_g_per_kwh"] == 207.0  # the site's factor
    assert co2["value"] == pytest.approx(kwh_today * 207 / 1000)
    car, kettles = co2["equivalents"]
    assert car["key"] == "car_km" and car["amount"] == pytest.approx(kwh_today * 207 / 170)
    assert kettles["key"] == "kettles" and kettles["amount"] == pytest.approx(kwh_today / 0.1)
    assert panel_of(data, "energy_today")["value"] == pytest.approx(kwh_today)


def test_co2_factor_can_be_overridden_per_panel(pv):
    display, _power, energy = pv
    now = local(2026, 7, 1, 12, 0)
    write(energy, cumulative(local(2026, 6, 30, 0, 0), now, 60, kwh_per_hour=1.0))
    panel = display.panels.get(kind="co2_saved")
    panel.options = {"grid_intensity_g_per_kwh": 100, "equivalents": ["phone_charges"]}
    panel.save()

    co2 = panel_of(kiosk_data.build(display, public_only=True, now=now), "co2_saved")

    assert co2["grid_g_per_kwh"] == 100
    assert co2["value"] == pytest.approx((12 + 1 / 60) * 100 / 1000)  # 12 h 1 min × 100 g
    assert [e["key"] for e in co2["equivalents"]] == ["phone_charges"]


def test_temperatures_and_hydro_show_each_feed_with_its_time(site, make_feed, redis_client):
    collector = make_feed("collector", "°C", public=True)
    tank = make_feed("tank", "°C", public=True)
    flow = make_feed("flow", "l/s", public=True)
    output = make_feed("output", "W", public=True)
    display = Display.objects.create(site=site, slug="heat", title="Heat")
    temps = Panel.objects.create(
        display=display, kind="temperatures", label="T",
        options={"labels": {str(tank.id): "Tank"}},
    )  # fmt: skip
    temps.feeds.set([collector, tank])
    hydro = Panel.objects.create(display=display, kind="hydro", label="H", order=1)
    hydro.feeds.set([output, flow])
    now = local(2026, 5, 5, 12, 0)
    for feed, value in [(collector, 71.5), (tank, 48.25), (flow, 120.0), (output, 4200.0)]:
        write(feed, [(now - 60, value)])

    data = kiosk_data.build(display, public_only=True, now=now)

    items = {i["label"]: i for i in panel_of(data, "temperatures")["items"]}
    assert items["collector"]["value"] == 71.5
    assert items["Tank"]["value"] == 48.25 and items["Tank"]["t"] == (now - 60) * 1000
    flow_item, output_item = panel_of(data, "hydro")["items"]  # flow first, whatever the order
    assert (flow_item["unit"], flow_item["value"]) == ("l/s", 120.0)
    assert (output_item["unit"], output_item["value"]) == ("W", 4200.0)


def test_a_panel_without_readings_shows_nothing_rather_than_zero(pv):
    display, _power, _energy = pv
    data = kiosk_data.build(display, public_only=True, now=local(2026, 7, 1, 12, 0))

    assert panel_of(data, "live_value")["value"] is None
    assert panel_of(data, "peak_today")["value"] is None
    assert panel_of(data, "co2_saved")["value"] is None
