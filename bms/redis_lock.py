"""A Redis lock that a crashed holder keeps for its TTL, but a Redis restart frees at once.

Why: a holder whose connection broke because Redis restarted cannot release its lock, and a
Redis with appendonly (docker/compose.yaml) brings the lock back for the rest of its TTL. The
feed commit (feeds/buffer.py, TTL 120 s) and the control tick (control/runner.py, TTL up to
two ticks) would then be skipped for that long: after a Redis restart, no commit for two
minutes, or no frost protection for a minute. So the lock's value is "<token> <run_id>", the
run_id of the Redis server it was taken on (another one after every restart), and a lock
found from an earlier server is taken over. As safe as the TTL running out: a holder that is
still working finds its lock gone at its next `renew` and stops.

No Django here: callers pass their redis client.
"""

from __future__ import annotations

import logging
import uuid

import redis

log = logging.getLogger(__name__)

# ARGV: our value, the current run_id, TTL. A lock without a run_id (or taken on this server)
# is respected; one from an earlier server is replaced by ours.
_TAKE_OVER = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ' ', 1, true)
  if not sep or string.sub(cur, sep + 1) == ARGV[2] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[3]))
return 1
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def server_run_id(client: redis.Redis) -> str:
    """The Redis server's run_id: another one after every restart ("" if INFO is refused)."""
    try:
        return str(client.info("server").get("run_id", ""))
    except redis.ResponseError as exc:  # INFO refused (an ACL): no takeover, only the TTL
        log.warning("no Redis run_id (%s): a lock left by a Redis restart waits for its TTL", exc)
        return ""


def acquire(client: redis.Redis, key: str, ttl_s: int) -> str | None:
    """Take the lock: its value (the token to renew and release it with), or None if it is
    held by someone on this Redis server."""
    run_id = server_run_id(client)
    token = f"{uuid.uuid4().hex} {run_id}"
    if client.set(key, token, nx=True, ex=ttl_s):
        return token
    if run_id and client.register_script(_TAKE_OVER)(keys=[key], args=[token, run_id, ttl_s]):
        log.warning("lock %s was left by a holder cut off by a Redis restart: taken over", key)
        return token
    return None


def renew(client: redis.Redis, key: str, token: str, ttl_s: int) -> bool:
    """Extend our lock; False if it is no longer ours (it ran out or was taken over)."""
    return bool(client.register_script(_RENEW)(keys=[key], args=[token, ttl_s]))


def release(client: redis.Redis, key: str, token: str) -> bool:
    """Release our lock; another holder's is left alone."""
    return bool(client.register_script(_RELEASE)(keys=[key], args=[token]))
