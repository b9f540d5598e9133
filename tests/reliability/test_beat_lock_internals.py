"""The RedBeat internals bms/beat_scheduler.py relies on, pinned on the suite's real Redis.

RedBeat documents its settings, not its lock, so taking the lock again after a Redis outage
uses its beat_init receiver and the scheduler's `lock` / `lock_key`. If an upgrade of
celery-redbeat changes any of them, these fail here rather than beat failing in production:

- RedBeat's beat_init receiver, given the beat service Celery sends, puts a Redis lock on
  `lock_key` that expires after `lock_timeout` in `scheduler.lock`;
- RedBeat's tick renews that lock and raises LockError once it is no longer ours, which the
  scheduler answers by taking a free lock again, or by standing by while another beat has it.

The whole path, with real beat processes and Redis restarts, is in test_beat_redis_outage.py
and test_beat_ha.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery.beat import Service
from redbeat.schedulers import acquire_distributed_beat_lock

from bms.beat_scheduler import ResilientRedBeatScheduler, remember_beat_service
from bms.celery import app


@pytest.fixture
def service(redis_client) -> Iterator[Service]:
    beat = Service(app=app, scheduler_cls=ResilientRedBeatScheduler, max_interval=5)
    remember_beat_service(sender=beat)  # as Celery's beat_init does
    yield beat
    beat.scheduler.lock = None  # the test's Redis is flushed: nothing to release


def test_the_beat_service_is_remembered_for_redbeats_lock_receiver(service):
    assert service.scheduler.beat_service is service


def test_redbeats_receiver_puts_a_lock_on_lock_key_that_expires(service, redis_client):
    scheduler = service.scheduler
    assert scheduler.lock_key and scheduler.lock is None

    acquire_distributed_beat_lock(sender=service)

    assert scheduler.lock is not None and scheduler.lock.owned()
    assert scheduler.lock.name == scheduler.lock_key
    assert 0 < redis_client.ttl(scheduler.lock_key) <= int(scheduler.lock_timeout)


def test_a_tick_without_the_lock_takes_it(service):
    scheduler = service.scheduler
    scheduler.tick()  # beat_init found Redis down: no lock yet
    assert scheduler.lock is not None and scheduler.lock.owned()


def test_a_lock_lost_to_a_redis_restart_is_taken_again(service, redis_client):
    scheduler = service.scheduler
    acquire_distributed_beat_lock(sender=service)
    redis_client.flushdb()  # a Redis restarted without persistence: lock and schedule gone

    assert scheduler.tick() == 0.0
    assert scheduler.lock.owned()
    assert redis_client.exists(scheduler.lock_key)
    assert redis_client.keys(f"{app.redbeat_conf.key_prefix}*"), "schedule written again"


def test_a_lock_another_beat_took_is_left_to_it(service, redis_client):
    scheduler = service.scheduler
    acquire_distributed_beat_lock(sender=service)
    redis_client.set(scheduler.lock_key, "another beat's token", ex=60)

    assert scheduler.tick() == float(scheduler.max_interval)
    assert redis_client.get(scheduler.lock_key) == b"another beat's token"
