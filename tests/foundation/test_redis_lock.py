"""bms.redis_lock on the real Redis: held, renewed, released, and taken over only when it was
taken on an earlier Redis server (the restart itself: tests/reliability/test_redis_restart.py)."""

from __future__ import annotations

from bms import redis_lock

KEY = "test:lock"


def test_a_held_lock_is_not_taken_and_only_its_holder_renews_or_releases_it(redis_client):
    token = redis_lock.acquire(redis_client, KEY, 30)
    assert token is not None and token.endswith(" " + redis_lock.server_run_id(redis_client))
    assert redis_lock.acquire(redis_client, KEY, 30) is None

    assert redis_lock.renew(redis_client, KEY, token, 90)
    assert 60 < redis_client.ttl(KEY) <= 90
    assert not redis_lock.renew(redis_client, KEY, "another holder", 90)
    assert not redis_lock.release(redis_client, KEY, "another holder")
    assert redis_client.get(KEY) == token.encode()

    assert redis_lock.release(redis_client, KEY, token)
    assert redis_client.get(KEY) is None
    assert redis_lock.acquire(redis_client, KEY, 30) is not None


def test_a_lock_taken_on_an_earlier_redis_server_is_taken_over(redis_client, caplog):
    redis_client.set(KEY, "0123abcd a-run-id-of-a-server-since-restarted", ex=120)
    token = redis_lock.acquire(redis_client, KEY, 30)
    assert token is not None
    assert redis_client.get(KEY) == token.encode() and redis_client.ttl(KEY) <= 30
    assert "taken over" in caplog.text


def test_a_lock_without_a_run_id_waits_for_its_ttl(redis_client):
    redis_client.set(KEY, "a-value-of-another-program", ex=120)
    assert redis_lock.acquire(redis_client, KEY, 30) is None
    assert redis_client.get(KEY) == b"a-value-of-another-program"
