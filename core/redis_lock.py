"""The one Redis lock (a lease: a key with a TTL, renewed by its holder, released only by it).

A Redis lock that outlives a crash of its holder only as long as nobody can tell it crashed.

The feed commit (feeds/store/buffer.py, TTL 120 s, renewed before every block), the control tick
(control/runner.py, TTL up to two ticks) and the ingest drain of a stream shard
(sensors/ingest/drain.py, a lease of a few seconds renewed as it goes) hold such a lock. A holder that cannot release it
leaves it for the rest of its TTL, and until then every commit, or every tick with frost
protection in it, is skipped. Two such cases can be told for certain, and the lock is taken
over at once in both:

- **Redis restarted** since the lock was taken (found by the kill and restart tests): the
  holder's connection broke, so it could not release the lock, and a Redis with appendonly
  (docker/compose.yaml) brought it back. Told by the server's run_id, another one after every
  restart.
- **The holder's process is dead**, on this machine (found by the 20-kill soak: a worker
  killed during a commit held commits off for two minutes). Told by the kernel's boot id, the
  PID namespace, the pid and the process's start time (so a reused pid is not taken for the
  holder).

The value is "<token> <run_id> <boot id>:<pid namespace>:<pid>:<start time>". A holder
elsewhere (a worker on another host or in another container) still waits for the TTL. As safe as the TTL running out: a
holder that is in fact still working finds its lock gone at its next `renew` and stops.

A lease as short as the drain's is simply waited out (`take_over=False`): telling its holder
dead would cost a round trip (INFO) on every try, longer than the lease saves.

TTLs are seconds, kept to the millisecond (`PX`), so a lease may be a fraction of a second long.
No Django here: callers pass their redis client.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from core import machine

log = logging.getLogger(__name__)

# Replace the lock only if it still holds the value we judged (ARGV: that value, ours, TTL).
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[3]))
return 1
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _ms(ttl_s: float) -> int:
    return max(1, int(ttl_s * 1000))


def server_run_id(client: redis.Redis) -> str:
    """The Redis server's run_id: another one after every restart ("" if INFO is refused)."""
    try:
        return str(client.info("server").get("run_id", ""))
    except redis.ResponseError as exc:  # INFO refused (an ACL): no takeover after a restart
        log.warning("no Redis run_id (%s): a lock left by a Redis restart waits for its TTL", exc)
        return ""


def _holder_gone(value: str, run_id: str) -> str | None:
    """Why the holder of a lock with this value cannot release it any more, or None."""
    parts = value.split(" ")
    if len(parts) < 2:
        return None  # not one of ours
    if run_id and parts[1] and parts[1] != run_id:
        return "taken before a Redis restart"
    holder = parts[2] if len(parts) > 2 else ""
    fields = holder.split(":")  # boot id, pid namespace, pid, start time
    if len(fields) != 4 or not fields[2].isdigit():
        return None  # no holder recorded (/proc could not tell)
    if (fields[0], fields[1]) != (machine.boot_id(), machine.pid_namespace()):
        return None  # another machine or namespace, or before a reboot: only the TTL can tell
    if machine.process_identity(int(fields[2])) == holder:
        return None  # alive
    return f"its holder (pid {fields[2]} on this machine) is dead"


def acquire(
    client: redis.Redis, key: str, ttl_s: float, *, take_over: bool = True, token: str | None = None
) -> str | None:
    """Take the lock: its value (the token to renew and release it with), or None if it is
    held by a live holder, or one that cannot be told dead (then it waits for the TTL).

    `token` names the holder at the head of the value (default a random one).
    `take_over=False`: taken only when free, the value `token` alone, and a holder that died
    is waited out for the TTL."""
    if not take_over:
        token = token or uuid.uuid4().hex
        return token if client.set(key, token, nx=True, px=_ms(ttl_s)) else None
    run_id = server_run_id(client)
    token = f"{token or uuid.uuid4().hex} {run_id} {machine.process_identity()}"
    if client.set(key, token, nx=True, px=_ms(ttl_s)):
        return token
    current = client.get(key)
    if current is None:  # released between the two calls
        return token if client.set(key, token, nx=True, px=_ms(ttl_s)) else None
    why = _holder_gone(current.decode(errors="replace"), run_id)
    if why and client.register_script(_TAKE_OVER)(keys=[key], args=[current, token, _ms(ttl_s)]):
        log.warning("lock %s taken over: %s", key, why)
        return token
    return None


def renew(client: redis.Redis, key: str, token: str, ttl_s: float) -> bool:
    """Extend our lock; False if it is no longer ours (it ran out or was taken over)."""
    return bool(client.register_script(_RENEW)(keys=[key], args=[token, _ms(ttl_s)]))


def release(client: redis.Redis, key: str, token: str) -> bool:
    """Release our lock; another holder's is left alone."""
    return bool(client.register_script(_RELEASE)(keys=[key], args=[token]))


# Many leases of one holder at once (the ingest drain holds a lease per shard it serves): one
# round trip for all of them, each key judged on its own.


def acquire_each(client: redis.Redis, keys: list[str], ttl_s: float, token: str) -> list[str]:
    """Take every free lock of `keys`, as acquire(take_over=False) does each: the keys taken."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.set(key, token, nx=True, px=_ms(ttl_s))
    return [key for key, ok in zip(keys, pipe.execute(), strict=True) if ok]


# The same as _RENEW and _RELEASE for every key of KEYS at once: one EVALSHA, a result per key.
_RENEW_EACH = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('GET', key) == ARGV[1] and redis.call('PEXPIRE', key, ARGV[2]) or 0
end
return out
"""

_RELEASE_EACH = """
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 1
"""


def renew_each(client: redis.Redis, keys: list[str], token: str, ttl_s: float) -> list[bool]:
    """renew() each key, in one script: per key, False if it is no longer ours."""
    if not keys:
        return []
    found = client.register_script(_RENEW_EACH)(keys=keys, args=[token, _ms(ttl_s)])
    return [bool(ok) for ok in found]


def release_each(client: redis.Redis, keys: list[str], token: str) -> None:
    """release() each key, in one script; another holder's are left alone."""
    if keys:
        client.register_script(_RELEASE_EACH)(keys=keys, args=[token])


@contextmanager
def held(client: redis.Redis, key: str, lease_s: int) -> Iterator[str | None]:
    """The lock for the length of a `with` block (its token; None, and the block runs without
    it, when another holds it), renewed by a thread every third of `lease_s`.

    So the TTL can be a short lease instead of the longest the work may take: a holder whose
    host dies (which no one on another machine can tell from /proc) frees the lock within
    `lease_s`, while a live holder keeps it however long the block runs. A holder cut off from
    Redis stops renewing and loses it after the lease, as a dead one would."""
    lease_s = max(1, int(lease_s))
    token = acquire(client, key, lease_s)
    if token is None:
        yield None
        return
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(lease_s / 3):
            try:
                if not renew(client, key, token, lease_s):
                    log.warning("lock %s lost while held (its lease ran out)", key)
                    return
            except (redis.RedisError, OSError) as exc:  # Redis away: the lease decides
                log.warning("lock %s not renewed: %s", key, exc)

    renewer = threading.Thread(target=keep, name=f"lease {key}", daemon=True)
    renewer.start()
    try:
        yield token
    finally:
        stop.set()
        renewer.join(timeout=5)
        release(client, key, token)
