"""core.redis_lock on the real Redis: held, renewed, released, and taken over only when its
holder can be told gone: taken on an earlier Redis server (the restart itself:
tests/reliability/test_redis_restart.py) or held by a dead process of this machine (a killed
commit: tests/feeds/test_crash.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from core import machine, redis_lock
from tests.wait import wait_for

KEY = "test:lock"


def test_a_held_lock_is_not_taken_and_only_its_holder_renews_or_releases_it(redis_client):
    token = redis_lock.acquire(redis_client, KEY, 30)
    run_id, holder = redis_lock.server_run_id(redis_client), machine.process_identity()
    assert token is not None and token.endswith(f" {run_id} {holder}")
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


def held_by(redis_client, holder: str) -> str:
    value = f"0123abcd {redis_lock.server_run_id(redis_client)} {holder}"
    redis_client.set(KEY, value, ex=120)
    return value


def test_a_lock_whose_holder_died_on_this_machine_is_taken_over(redis_client, caplog):
    child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    holder = machine.process_identity(child.pid)
    child.kill()
    child.wait()
    held_by(redis_client, holder)
    token = redis_lock.acquire(redis_client, KEY, 30)
    assert token is not None and redis_client.get(KEY) == token.encode()
    assert f"pid {child.pid} on this machine) is dead" in caplog.text


def test_a_killed_holder_not_yet_reaped_is_dead_too(redis_client):
    """A zombie still has its /proc entry until its parent (or init) reaps it."""
    child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    try:
        held_by(redis_client, machine.process_identity(child.pid))
        child.kill()
        wait_for(lambda: machine.process_identity(child.pid) == "", 10, "the kernel to make it"
                 " a zombie", every_s=0.01)  # fmt: skip
        assert redis_lock.acquire(redis_client, KEY, 30) is not None
    finally:
        child.wait()


def _holder(kind: str) -> str:
    boot_id, namespace, pid, started = machine.process_identity().split(":")
    return {
        "this live process": f"{boot_id}:{namespace}:{pid}:{started}",
        "a pid reused since": f"{boot_id}:{namespace}:{pid}:{int(started) + 1}",
        "another machine or boot": f"another-boot-id:{namespace}:999999:1",
        "another container": f"{boot_id}:4026000000:999999:1",
        "no holder recorded": "",
    }[kind]


@pytest.mark.parametrize(
    ("kind", "taken_over"),
    [
        ("this live process", False),
        ("a pid reused since", True),  # the process with that pid started at another time
        ("another machine or boot", False),  # only the TTL can tell
        ("another container", False),  # a pid of another PID namespace means nothing here
        ("no holder recorded", False),
    ],
)
def test_only_a_holder_known_to_be_dead_loses_its_lock(redis_client, kind, taken_over):
    value = held_by(redis_client, _holder(kind))
    token = redis_lock.acquire(redis_client, KEY, 30)
    assert (token is not None) == taken_over
    assert redis_client.get(KEY) == (token or value).encode()


def test_a_held_lease_outlives_its_ttl_while_the_block_runs_and_is_released_after(redis_client):
    with redis_lock.held(redis_client, KEY, 2) as token:
        assert token is not None and redis_client.ttl(KEY) <= 2
        # A real pause, proving a negative: Redis's own clock expires keys, and for longer
        # than the lease the renewing thread keeps it.
        time.sleep(3.5)
        assert redis_client.get(KEY) == token.encode()
        with redis_lock.held(redis_client, KEY, 2) as second:
            assert second is None  # held: the other block runs without it
    assert redis_client.get(KEY) is None


def test_a_lease_whose_holder_stopped_renewing_is_free_within_the_lease(redis_client):
    """What another host sees when the holder's host dies: no renewal, then no lock."""
    run_id = redis_lock.server_run_id(redis_client)
    held = redis_client.set(KEY, f"0123abcd {run_id} another-host:1:2:3", ex=2)
    assert held and redis_lock.acquire(redis_client, KEY, 2) is None
    wait_for(lambda: redis_lock.acquire(redis_client, KEY, 2), 10, "the lease to lapse")


def test_only_the_beat_holding_redbeats_lock_counts_as_active():
    """A standby beat waits for RedBeat's lock and must not stamp the health heartbeat, or a
    dead active beat would look alive (bms/celery.py)."""
    from types import SimpleNamespace

    from bms.celery import is_standby

    assert is_standby(SimpleNamespace(lock_key="bms:redbeat::lock", lock=None))
    assert not is_standby(SimpleNamespace(lock_key="bms:redbeat::lock", lock=object()))
    assert not is_standby(SimpleNamespace())  # Celery's file scheduler: no lock, always active
    assert not is_standby(None)
