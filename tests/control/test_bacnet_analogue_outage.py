"""A BACnet analogue output handed back while the database is away: the tick, on its cached
configuration, still relinquishes it at the independent bac-py controller, and its "Released"
audit row waits in Redis until the database is back, as the holding registers' rows do
(control/bacnet_outputs.py, control/runner.py _catch_up)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from control import config_cache
from control.bacnet_outputs import HELD_KEY
from control.models import AnalogueCommand, WeatherCompensation
from control.runner import run_tick
from tests.sensors import bacnet_peer

from . import test_bacnet_analogue as analogue
from .test_bacnet_analogue import MIXING, read
from .test_database_outage import OFFLINE, database_unavailable

pytestmark = pytest.mark.django_db(transaction=True)
controller, plant = bacnet_peer.controller, analogue.plant  # the fixtures

RELEASED = "Released: NULL at priority 8 of " + MIXING


def test_a_release_during_a_database_outage_is_audited_when_it_is_back(
    redis_client, controller, plant
):
    now = timezone.now()
    run_tick(now)
    assert read(controller).priority == 8  # our valve position holds the object

    # The plant lets go while its controller is away: not handed back yet (no answer), tried
    # again each tick; the configuration cached by this tick no longer drives the output.
    WeatherCompensation.objects.filter(plant=plant).update(enabled=False)
    controller.stop()
    run_tick(now + timedelta(seconds=30))
    assert redis_client.hexists(HELD_KEY, str(plant.pk))
    assert not AnalogueCommand.objects.filter(reason__startswith=RELEASED).exists()

    # The controller is back, the database is not: handed back, its audit row queued.
    controller.start()
    with database_unavailable():
        report = run_tick(now + timedelta(seconds=60))
        assert report["offline"].startswith(OFFLINE)
        queued = config_cache.pending_analogue()
    assert [row["reason"] for row in queued] == [
        f"{RELEASED} ({controller.address}), so the controller's own logic has it again"
    ]
    assert queued[0]["confirmed_at"] is not None
    assert not redis_client.hexists(HELD_KEY, str(plant.pk))
    back = read(controller)
    assert (back.value, back.priority, back.ours) == (pytest.approx(20.0), 16, None)

    # The database is back: the first tick writes the row, once, and the queue is empty.
    run_tick(now + timedelta(seconds=90))
    released = AnalogueCommand.objects.get(plant=plant, strategy="released")
    assert released.reason == queued[0]["reason"] and released.confirmed_at is not None
    assert config_cache.pending_analogue() == []
    run_tick(now + timedelta(seconds=120))
    assert AnalogueCommand.objects.filter(plant=plant, strategy="released").count() == 1
