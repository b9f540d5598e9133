"""The feed explorer driven in real headless Chromium: every posted reading is drawn at
every zoom, one y axis per unit, times in the site's zone whatever the browser's, search, the
view in a link, drag-to-zoom with a visible box, stats of the visible range, CSV at a chosen
interval. What the chart holds is read from the Chart.js instance itself."""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.roles import ENGINEERS
from feeds.models import Feed
from feeds.store import service
from tests.browser import logged_in_page
from tests.integration import test_staff_browser as _base

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

server = _base.server  # a real WSGI server in this process, on a free port
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
SPANS = [3600, 21600, 86400, 604800, 2592000, 31536000, 157680000]  # 1 h ... 5 y
NOW = int(time.time()) // 10 * 10
# The sparse feed: one reading every 10 min over the last 6 h on a 10 s feed, and the two
# readings of the first-node walkthrough two years ago.
SPARSE = [(NOW - 6 * 3600 + i * 600, 18.0 + (i % 7) * 0.5) for i in range(36)]
OLD = [(NOW - 2 * 365 * 86400, 21.5), (NOW - 2 * 365 * 86400 + 60, 21.7)]
# The dense feed: PV watts every 10 s for the last 6 h (hundreds of times the temperatures).
DENSE = [(NOW - 6 * 3600 + i * 10, 1500.0 + (i % 100) * 20) for i in range(2160)]
# A fixed past hour for the stats and the export: known values, every 10 s.
HOUR0 = (NOW - 30 * 86400) // 3600 * 3600
STATS_T = [(HOUR0 + i * 10, 20.0 + (i * 7 % 13) * 0.25) for i in range(360)]
STATS_W = [(HOUR0 + i * 10, 1000.0 + (i % 60) * 10) for i in range(360)]


@pytest.fixture
def site_data(redis_client) -> dict:
    user = User.objects.create_user("estates", password=_base.PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    feeds = {
        "temp": Feed.objects.create(name="temp", tag="emontx-hall", unit="°C", interval=10),
        "pv": Feed.objects.create(name="power", tag="emonpi-roof", unit="W", interval=10),
        "humidity": Feed.objects.create(name="humidity", tag="emontx-hall", unit="%", interval=10),
        "office": Feed.objects.create(
            name="office temp", tag="emonth-office", unit="°C", interval=10
        ),  # fmt: skip
        "meter": Feed.objects.create(name="import", tag="meter", unit="kWh", interval=10),
    }
    service.log_points((feeds["temp"].pk, t, v) for t, v in [*OLD, *SPARSE])
    service.log_points((feeds["pv"].pk, t, v) for t, v in DENSE)
    service.log_points((feeds["office"].pk, t, v) for t, v in STATS_T)
    service.log_points((feeds["pv"].pk, t, v) for t, v in STATS_W)
    return {name: feed.pk for name, feed in feeds.items()}


@pytest.fixture
def ny_page(server) -> Iterator[tuple[Page, dict]]:
    """A logged-in engineer whose browser is set to New York (the site is in London)."""
    viewport = {"width": 1280, "height": 900}
    with logged_in_page(
        server.url, "estates", _base.PASSWORD, "/staff/", viewport, "America/New_York"
    ) as opened:
        yield opened


def wait_loaded(page: Page, after: int) -> int:
    page.wait_for_function(f"window.bmsExplorer.loaded > {after}")
    return page.evaluate("window.bmsExplorer.loaded")


CHART_STATE = """() => {
  const chart = window.bmsExplorer.chart;
  return {
    min: chart.scales.x.min, max: chart.scales.x.max, interval: window.bmsExplorer.state.interval,
    axes: Object.keys(chart.scales).filter((k) => k.startsWith('y')).map((k) => ({
      id: k, title: chart.scales[k].options.title.text, position: chart.scales[k].position })),
    datasets: chart.data.datasets.map((d) => ({
      feed: d.feedId, axis: d.yAxisID, type: d.type,
      points: d.data.map((p, i) => [p.t, p.y, Array.isArray(d.pointRadius) ? d.pointRadius[i] : d.pointRadius]),
    })),
  };
}"""


def _windows(readings, start_ms: int, end_ms: int, interval_s: int) -> set[int]:
    """The averaging windows (starts, ms) in view that hold at least one reading (the first
    window starts on a whole interval, at or before the range's start)."""
    step = interval_s * 1000
    starts = {t * 1000 // step * step for t, _ in readings}
    return {w for w in starts if start_ms - step < w <= end_ms}


def test_zoom_from_1_hour_to_5_years_draws_every_reading_on_its_own_axis(ny_page, server,
                                                                          site_data):  # fmt: skip
    page, seen = ny_page
    page.goto(server.url + "/staff/feeds/")
    loaded = page.evaluate("window.bmsExplorer.loaded")
    page.check(f'#feed-list input[value="{site_data["temp"]}"]')
    loaded = wait_loaded(page, loaded)
    page.check(f'#feed-list input[value="{site_data["pv"]}"]')
    loaded = wait_loaded(page, loaded)
    for span in SPANS:
        page.click(f'button[data-span="{span}"]')
        loaded = wait_loaded(page, loaded)
        chart = page.evaluate(CHART_STATE)
        # Two units, two axes: °C on the left, W on the right, each titled with its unit.
        assert chart["axes"] == [
            {"id": "y0", "title": "°C", "position": "left"},
            {"id": "y1", "title": "W", "position": "right"},
        ], span
        temp, pv = chart["datasets"]
        assert (temp["feed"], temp["axis"], pv["feed"], pv["axis"]) == (
            str(site_data["temp"]),
            "y0",
            str(site_data["pv"]),
            "y1",
        )
        for series, readings in ((temp, OLD + SPARSE), (pv, STATS_W + DENSE)):
            points = series["points"]
            drawn = [t for t, y, _ in points if y is not None]
            # Every window holding a reading has a value ...
            expected = _windows(readings, chart["min"], chart["max"], chart["interval"])
            assert set(drawn) == expected, (span, series["feed"])
            # ... and each is visible: a dot, or one end of a line to a neighbour.
            for i, (_, y, radius) in enumerate(points):
                if y is None:
                    continue
                before = points[i - 1][1] if i else None
                after = points[i + 1][1] if i + 1 < len(points) else None
                assert radius > 0 or before is not None or after is not None, (span, i)
        if span == 21600:  # the zoom where 328 of 391 points were invisible
            # Every temperature is alone in its window: each one a dot. How many of the 36 are
            # still in view depends on how long the test took since they were posted (a loaded
            # machine: 34), so the count is the readings inside the chart's own range.
            dots = [r for _, y, r in temp["points"] if y is not None]
            in_view = _windows(OLD + SPARSE, chart["min"], chart["max"], chart["interval"])
            assert len(dots) == len(in_view) >= 30 and all(r > 0 for r in dots)
        if span == 157680000:  # the walkthrough's two readings, two years ago, still show
            old = [
                (t, r) for t, y, r in temp["points"] if y is not None and t < OLD[1][0] * 1000 + 1
            ]
            assert old and all(r > 0 for _, r in old)
            page.screenshot(path=str(IMG / "staff-feeds-5y-two-units.png"))
        if span == 21600:
            page.screenshot(path=str(IMG / "staff-feeds-two-units.png"))
    assert seen["errors"] == []


def test_times_are_in_the_site_zone_in_a_new_york_browser(ny_page, server, site_data):
    page, seen = ny_page
    assert settings.TIME_ZONE == "Europe/London"
    start = int(datetime(2025, 7, 1, 14, 1, tzinfo=UTC).timestamp())  # 15:01 BST, 10:01 EDT
    page.goto(f"{server.url}/staff/feeds/#feeds={site_data['temp']}&start={start}"
              f"&end={start + 3600}&interval=auto")  # fmt: skip
    page.wait_for_function("window.bmsExplorer.loaded > 0")
    assert page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == "America/New_York"
    label = page.inner_text("#range-label")
    assert label.startswith("Tue 1 Jul 2025 15:01 – Tue 1 Jul 2025 16:01 (Europe/London)"), label
    assert "10:01" not in label
    ticks = page.evaluate("window.bmsExplorer.chart.scales.x.ticks.map((t) => [t.value, t.label])")
    london = ZoneInfo("Europe/London")
    labels = []
    for value, label_text in ticks:
        local = datetime.fromtimestamp(value / 1000, london)
        # Regular ticks: whole 5 or 10 minutes of the London clock, labelled in London time.
        assert local.second == 0 and local.minute % 5 == 0, local
        assert label_text == f"{local:%H:%M}"
        labels.append(label_text)
    steps = {b[0] - a[0] for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1 and len(ticks) >= 4, labels
    assert labels[0] in ("15:05", "15:10"), labels
    assert seen["errors"] == []


def test_search_filters_the_feed_list_grouped_by_node(ny_page, server, site_data):
    page, _ = ny_page
    page.goto(server.url + "/staff/feeds/")
    legends = page.locator("#feed-list legend").all_inner_texts()
    assert legends == ["emonpi-roof", "emonth-office", "emontx-hall", "meter"]
    page.fill("#feed-search", "temp")
    visible = page.locator("#feed-list label:visible").all_inner_texts()
    assert [v.strip() for v in visible] == ["office temp (°C)", "temp (°C)"]
    expect(page.locator("fieldset", has_text="emonpi-roof")).to_be_hidden()
    page.fill("#feed-search", "hall °c")  # every word: the node and the unit
    assert [v.strip() for v in page.locator("#feed-list label:visible").all_inner_texts()] == [
        "temp (°C)"
    ]
    page.fill("#feed-search", "no such feed")
    expect(page.locator("#feed-none")).to_be_visible()
    page.fill("#feed-search", "")
    assert page.locator("#feed-list label:visible").count() == 5


def test_a_link_restores_the_view(ny_page, server, site_data):
    page, seen = ny_page
    page.goto(server.url + "/staff/feeds/")
    loaded = page.evaluate("window.bmsExplorer.loaded")
    page.check(f'#feed-list input[value="{site_data["temp"]}"]')
    page.check(f'#feed-list input[value="{site_data["pv"]}"]')
    page.click('button[data-span="21600"]')
    page.select_option("#interval", "300")
    page.wait_for_function(f"window.bmsExplorer.loaded > {loaded}")
    # The last load asked for is the one drawn (each click starts one).
    page.wait_for_function(
        "window.bmsExplorer.state.interval === 300"
        " && window.bmsExplorer.loaded === window.bmsExplorer.state.loads"
    )
    before = page.evaluate(CHART_STATE)
    link = page.evaluate("document.getElementById('share').href")
    assert "interval=300" in link and f"{site_data['temp']}" in link
    other = page.context.new_page()
    other.goto(link)
    other.wait_for_function(
        "window.bmsExplorer.loaded > 0 && window.bmsExplorer.chart.data.datasets.length === 2"
    )
    after = other.evaluate(CHART_STATE)
    assert (after["min"], after["max"], after["interval"]) == (
        before["min"], before["max"], 300
    )  # fmt: skip
    assert after["datasets"] == before["datasets"]
    assert other.input_value("#interval") == "300"
    checked = other.eval_on_selector_all("#feed-list input:checked", "els => els.map(e => e.value)")
    assert sorted(checked) == sorted([str(site_data["temp"]), str(site_data["pv"])])
    assert seen["errors"] == []


def test_drag_box_zooms_into_the_selection(ny_page, server, site_data):
    page, seen = ny_page
    page.goto(f"{server.url}/staff/feeds/#feeds={site_data['pv']}&start={NOW - 21600}&end={NOW}")
    page.wait_for_function("window.bmsExplorer.loaded > 0")
    area = page.evaluate("window.bmsExplorer.chart.chartArea")
    box = page.locator("#chart").bounding_box()
    y = box["y"] + (area["top"] + area["bottom"]) / 2
    x0 = box["x"] + area["left"] + (area["right"] - area["left"]) * 0.25
    x1 = box["x"] + area["left"] + (area["right"] - area["left"]) * 0.5
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=3)
    page.mouse.move(x1, y, steps=3)
    drag = page.locator("#drag-box")
    expect(drag).to_be_visible()  # the selection is drawn while dragging
    drawn = drag.bounding_box()
    assert abs(drawn["x"] - x0) < 2 and abs(drawn["width"] - (x1 - x0)) < 2
    page.screenshot(path=str(IMG / "staff-feeds-drag.png"))
    page.mouse.up()
    expect(drag).to_be_hidden()
    page.wait_for_function("window.bmsExplorer.loaded > 1")
    chart = page.evaluate(CHART_STATE)
    # A quarter of 6 h, from 1.5 h into the view (to a pixel's worth of time).
    assert abs((chart["max"] - chart["min"]) / 1000 - 5400) < 60
    assert abs(chart["min"] / 1000 - (NOW - 21600 + 5400)) < 60
    assert seen["errors"] == []


def test_stats_and_csv_of_the_visible_range(ny_page, server, site_data):
    page, seen = ny_page
    page.goto(f"{server.url}/staff/feeds/#feeds={site_data['office']},{site_data['pv']}"
              f"&start={HOUR0}&end={HOUR0 + 3600}&interval=auto")  # fmt: skip
    page.wait_for_function("window.bmsExplorer.loaded > 0")
    row = page.locator(f'#stats tr[data-feed="{site_data["office"]}"]')
    values = [v for _, v in STATS_T]
    mean = sum(values) / len(values)
    expect(row.locator("[data-stat=mean]")).to_have_text(f"{mean:.1f} °C")
    expect(row.locator("[data-stat=min]")).to_have_text(f"{min(values):.1f} °C")
    expect(row.locator("[data-stat=max]")).to_have_text(f"{max(values):.1f} °C")
    expect(row.locator("[data-stat=points]")).to_have_text("360")
    expect(row.locator("[data-stat=total]")).to_have_text("–")  # no total of temperatures
    # Watts: the energy of the hour, in kWh.
    kwh = sum(v for _, v in STATS_W) * 10 / 3600 / 1000
    pv_row = page.locator(f'#stats tr[data-feed="{site_data["pv"]}"]')
    expect(pv_row.locator("[data-stat=total]")).to_have_text(re.compile(r"^[\d.]+ kWh$"))
    assert float(pv_row.locator("[data-stat=total]").inner_text().split()[0]) == pytest.approx(
        kwh, abs=0.006
    )
    page.screenshot(path=str(IMG / "staff-feeds-stats.png"))

    # CSV: the raw values, exactly as posted, or daily averages.
    page.select_option("#export-interval", "raw")
    href = page.get_attribute("#export", "href")
    assert "interval=raw" in href
    text = page.evaluate(f"fetch('{href}').then((r) => r.text())")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == [
        "time (Europe/London)",
        "unix",
        "emonth-office:office temp (°C)",
        "emonpi-roof:power (W)",
    ]
    assert [(int(r[1]), float(r[2])) for r in rows[1:] if r[2]] == STATS_T
    assert [(int(r[1]), float(r[3])) for r in rows[1:] if r[3]] == STATS_W
    page.select_option("#export-interval", "daily")
    assert "interval=daily" in page.get_attribute("#export", "href")
    assert seen["errors"] == []


def test_the_total_of_a_range_does_not_change_with_the_interval(ny_page, server, site_data):
    """The same drag-selected range gave 14.5 kWh at 5 min and 22.6 at
    daily (whole windows outside the view were counted). 40 minutes inside the known hour, drawn
    at 5 min and at daily: the same total, that of the readings in the range."""
    page, seen = ny_page
    start, end = HOUR0 + 600, HOUR0 + 3000
    kwh = sum(v for t, v in STATS_W if start <= t < end) * 10 / 3600 / 1000
    totals = {}
    for interval in ("300", "daily", "monthly"):
        page.goto(f"{server.url}/staff/feeds/#feeds={site_data['pv']}"
                  f"&start={start}&end={end}&interval={interval}")  # fmt: skip
        page.reload()  # a hash change alone does not load the view again
        page.wait_for_function("window.bmsExplorer.loaded > 0")
        cell = page.locator(f'#stats tr[data-feed="{site_data["pv"]}"] [data-stat=total]')
        expect(cell).to_have_text(re.compile(r"^[\d.]+ kWh$"))
        totals[interval] = float(cell.inner_text().split()[0])
    assert totals["300"] == pytest.approx(kwh, abs=0.006), totals
    assert totals["daily"] == totals["300"] == totals["monthly"], totals
    assert seen["errors"] == []


def test_a_meter_is_drawn_as_daily_kwh_bars(ny_page, server, site_data):
    page, seen = ny_page

    def meter_readings():
        # A cumulative meter read hourly, 10 s before each hour: 10 kWh, 12.5 kWh and 7 kWh
        # used on three London days (a day's energy: its last reading minus the day before's).
        day0 = int(datetime(2025, 3, 3, tzinfo=ZoneInfo("Europe/London")).timestamp())
        readings, total = [(day0 - 10, 100.0)], 100.0
        for d, used in enumerate((10.0, 12.5, 7.0)):
            for h in range(1, 25):
                readings.append((day0 + d * 86400 + h * 3600 - 10, round(total + used * h / 24, 4)))
            total += used
        return day0, readings

    day0, readings = meter_readings()
    _base_in_thread(lambda: service.log_points((site_data["meter"], t, v) for t, v in readings))
    page.goto(f"{server.url}/staff/feeds/#feeds={site_data['meter']}&start={day0}"
              f"&end={day0 + 3 * 86400 - 1}&interval=daily")  # fmt: skip
    page.wait_for_function("window.bmsExplorer.loaded > 0")
    chart = page.evaluate(CHART_STATE)
    (meter,) = chart["datasets"]
    assert meter["type"] == "bar"
    bars = [round(y, 3) for _, y, _ in meter["points"] if y is not None]
    assert bars == [10.0, 12.5, 7.0]
    assert page.evaluate("window.bmsExplorer.chart.scales.y0.min") == 0  # bars from zero
    row = page.locator(f'#stats tr[data-feed="{site_data["meter"]}"]')
    expect(row.locator("[data-stat=total]")).to_have_text("29.5 kWh")
    page.screenshot(path=str(IMG / "staff-feeds-daily-kwh.png"))
    assert seen["errors"] == []


def _base_in_thread(work):
    from tests.integration.test_staff_ux_browser import in_thread

    return in_thread(work)
