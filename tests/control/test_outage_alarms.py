"""The return from a database outage is not a burst of alarms (issue 27, item 8): alarms raised
during the outage (queued in Redis) are held for BMS_CONTROL_OUTAGE_ALARM_GRACE_S once the
database is back, and raised only if nothing cleared them meanwhile. The outage's own alarm
(control-db:unavailable) is recorded at once. Outages as in test_database_outage.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from alarms.models import Alarm
from control import config_cache
from control.runner import run_tick

from . import factories as f
from .test_database_outage import board, database_unavailable  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _zone_goes_stale_during_an_outage(board, settings):  # noqa: F811
    settings.BMS_CONTROL_OUTAGE_ALARM_GRACE_S = 300
    valve = f.relay("Hall valve", board, coil=6)
    t0 = timezone.now()
    zone = f.zone("Hall", valve, temp=18.0)
    f.set_temperature(zone, 18.0, t=t0.timestamp())
    run_tick(t0)  # configuration cached
    with database_unavailable():
        # No reading for 20 minutes: the sensor is stale (limit 15 min).
        report = run_tick(t0 + timedelta(minutes=20))
        assert report["offline"]
    assert f"zone-sensor:{zone.pk}" in config_cache.pending_alarms()
    return zone, t0


def test_an_alarm_whose_cause_ended_by_the_return_is_never_raised(redis_client, board, settings):  # noqa: F811
    zone, t0 = _zone_goes_stale_during_an_outage(board, settings)
    back = t0 + timedelta(minutes=21)
    f.set_temperature(zone, 18.2, t=back.timestamp())  # readings arrive again
    run_tick(back)
    run_tick(back + timedelta(minutes=10))  # past the grace
    assert not Alarm.objects.filter(key=f"zone-sensor:{zone.pk}").exists()
    # The outage itself is on record, once.
    assert Alarm.objects.filter(key="control-db:unavailable").count() == 1
    assert config_cache.held_alarms() == {}


def test_one_still_standing_after_the_grace_is_raised(redis_client, board, settings):  # noqa: F811
    zone, t0 = _zone_goes_stale_during_an_outage(board, settings)
    back = t0 + timedelta(minutes=21)
    run_tick(back)
    assert not Alarm.objects.filter(key=f"zone-sensor:{zone.pk}").exists()  # held
    run_tick(back + timedelta(seconds=299))
    assert not Alarm.objects.filter(key=f"zone-sensor:{zone.pk}").exists()
    run_tick(back + timedelta(seconds=300))
    alarm = Alarm.objects.get(key=f"zone-sensor:{zone.pk}")
    assert alarm.cleared_at is None and alarm.message.endswith("(since the database outage)")
    assert config_cache.held_alarms() == {}


def test_without_a_grace_they_are_raised_at_the_return(redis_client, board, settings):  # noqa: F811
    zone, t0 = _zone_goes_stale_during_an_outage(board, settings)
    settings.BMS_CONTROL_OUTAGE_ALARM_GRACE_S = 0
    run_tick(t0 + timedelta(minutes=21))
    assert Alarm.objects.filter(key=f"zone-sensor:{zone.pk}", cleared_at__isnull=True).exists()
