"""A brand-new demo site gets a week of history so the kiosk is not empty on first run."""

import time
from io import StringIO

import pytest
from django.core.management import call_command

from feeds.models import Feed
from feeds.store import service

ROLES = {
    "pv_power": ("emontx-pv", "PV power"),
    "pv_kwh": ("emontx-pv", "PV energy"),
    "hydro_power": ("emontx-hydro", "Hydro power"),
    "hydro_kwh": ("emontx-hydro", "Hydro energy"),
    "hydro_flow": ("emontx-hydro", "River flow"),
    "thermal_collector": ("emontx-solarthermal", "Collector temperature"),
    "thermal_tank": ("emontx-solarthermal", "Tank temperature"),
    "thermal_power": ("emontx-solarthermal", "Solar heat"),
    "thermal_kwh": ("emontx-solarthermal", "Solar heat energy"),
}


@pytest.fixture
def fresh(tmp_path, settings, redis_client):
    settings.BMS_DATA_DIR = tmp_path
    settings.BMS_FEED_DIR = tmp_path / "feeds"
    settings.BMS_FEED_DIR.mkdir()


def _setup(days: int) -> str:
    out = StringIO()
    call_command("simulate_site", "--setup-only", "--history-days", str(days), "--seed", "4",
                 stdout=out)  # fmt: skip
    return out.getvalue()


def _feed(role: str) -> Feed:
    tag, name = ROLES[role]
    return Feed.objects.get(tag=tag, name=name)


@pytest.mark.django_db
def test_history_fills_every_kiosk_feed_up_to_now_once(fresh):
    first = _setup(days=2)
    assert "Filled 2 days of history" in first
    now = time.time()
    for role in ROLES:
        t, _value = service.last_value(_feed(role).pk)
        assert now - 180 < t <= now  # ends just before now: live posts carry on from there
    assert "Filled" not in _setup(days=2)  # not a fresh site any more: nothing rewritten


@pytest.mark.django_db
def test_history_kwh_is_cumulative_and_pv_follows_the_sun(fresh):
    _setup(days=2)
    end = int(time.time())
    start = end - 2 * 86400 + 600
    kwh = [v for _t, v in service.read(_feed("pv_kwh").pk, start, end, 600) if v is not None]
    assert kwh == sorted(kwh) and kwh[-1] > kwh[0]
    power = service.read(_feed("pv_power").pk, start, end, 3600, average=True)
    values = [v for _t, v in power if v is not None]
    assert min(values) == 0.0  # nights
    assert max(values) > 300  # days, even in a Welsh winter


@pytest.mark.django_db
def test_live_power_to_kwh_carries_on_from_the_history_total(fresh):
    _setup(days=1)
    feed = _feed("pv_kwh")
    t0, total = service.last_value(feed.pk)
    steps = [{"process": "log_to_feed", "feed": _feed("pv_power").pk},
             {"process": "power_to_kwh", "feed": feed.pk}]  # fmt: skip
    # As emoncms's power_to_kwh: the first point counts its power since the feed's last point
    # (60 s, under emoncms's 2 h bound), the second another 3600 W × 60 s.
    service.process_inputs([("demo:power", steps, t0 + 60, 3600.0)])
    service.process_inputs([("demo:power", steps, t0 + 120, 3600.0)])
    t1, after = service.last_value(feed.pk)
    assert t1 == t0 + 120
    assert after == pytest.approx(total + 2 * 3600 * 60 / 3.6e6, abs=1e-3)  # carries on


@pytest.mark.django_db
def test_no_history_when_asked_for_none(fresh):
    assert "Filled" not in _setup(days=0)
    assert service.last_value(_feed("pv_power").pk) is None


@pytest.mark.django_db
def test_the_default_history_fits_the_backfill_bound_and_raises_no_alarm(fresh, settings):
    """A fresh demo seeded 8 days while the optional age bound is set to 7 days (before it
    was clipped: 1442 points refused per feed, 9 alarms)."""
    from alarms.models import Alarm
    from alarms.watchdog import check_refused

    settings.BMS_FEED_MAX_BACKFILL_DAYS = 7
    out = _setup(days=8)  # the command's default
    assert "Filled 7 days of history" in out
    result = service.commit_all(sync=True)
    assert result["refused"] == {}
    assert check_refused() == {}
    assert not Alarm.objects.filter(key__startswith="feed-refused:").exists()
    t, _ = service.read(_feed("pv_power").pk, int(time.time()) - 7 * 86400, int(time.time()), 3600)[
        1
    ]
    assert t is not None
