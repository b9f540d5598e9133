"""Fixtures for the kiosk tests: a site in Europe/London, feeds by role, data written through
the real feed store (feeds.store.service, Redis + PHPFina files), and the three demo displays."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from demo.displays import ensure_demo_displays
from feeds.models import Feed
from feeds.store import service
from sensors.models import Site

LONDON = ZoneInfo("Europe/London")
ROLES = {
    "pv_power": "W",
    "pv_kwh": "kWh",
    "thermal_collector": "°C",
    "thermal_tank": "°C",
    "thermal_power": "W",
    "thermal_kwh": "kWh",
    "hydro_power": "W",
    "hydro_kwh": "kWh",
    "hydro_flow": "l/s",
    "grid_power": "W",  # import positive, export negative: the site energy flow's grid
}


@pytest.fixture(autouse=True)
def _no_backfill_bound(settings):
    # These tests write days of readings at fixed 2026 dates and commit at the real clock: the
    # feed store's backfill bound (a new feed starts at most BMS_FEED_MAX_BACKFILL_DAYS before
    # now, tests/feeds/test_padding_bounds.py) would refuse them once those dates are past.
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000


def local(*args: int) -> int:
    """Unix seconds of a wall-clock time in Europe/London."""
    return int(datetime(*args, tzinfo=LONDON).timestamp())


def write(feed: Feed, points: Iterable[tuple[int, float]], commit_at: float | None = None) -> None:
    """Write points through the feed store and commit them to the feed's file."""
    service.log_points((feed.id, t, v) for t, v in points)
    service.commit_all(now=commit_at)


def cumulative(start: int, end: int, step: int, kwh_per_hour: float) -> list[tuple[int, float]]:
    """A meter counting up steadily: kWh since `start`."""
    return [(t, (t - start) / 3600 * kwh_per_hour) for t in range(start, end + 1, step)]


@pytest.fixture(autouse=True)
def feed_dir(tmp_path, settings):
    """Feed files of this test only: ids are reused across tests, files must not be."""
    directory = tmp_path / "feeds"
    directory.mkdir()
    settings.BMS_FEED_DIR = directory
    return directory


@pytest.fixture
def site(db) -> Site:
    return Site.objects.create(name="Demo site", slug="demo", time_zone="Europe/London")


@pytest.fixture
def make_feed(db) -> Callable[..., Feed]:
    def make(name: str, unit: str, interval: int = 60, public: bool = False) -> Feed:
        return Feed.objects.create(
            name=name, tag="kiosk", unit=unit, interval=interval, public=public
        )

    return make


@pytest.fixture
def role_feeds(make_feed, redis_client) -> dict[str, Feed]:
    return {role: make_feed(role, unit) for role, unit in ROLES.items()}


@pytest.fixture
def demo_displays(site, role_feeds):
    return {d.slug: d for d in ensure_demo_displays(site, role_feeds)}
