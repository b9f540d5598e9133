"""One Redis connection pool per process, from settings.REDIS_URL, or through Sentinel.

With REDIS_SENTINELS set (host:port list, docs/DEPLOYMENT.md "Scale-out"), the client asks the
Sentinels for the primary of REDIS_SENTINEL_MASTER (the db number still comes from REDIS_URL)
and follows a failover by itself. With BMS_REDIS_WAIT_REPLICAS > 0, `durably` makes a write
durable on that many replicas before the caller answers `ok` (the ingest append).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import redis
from django.conf import settings
from redis.commands.core import Script
from redis.sentinel import Sentinel

_clients: dict[str, redis.Redis] = {}

# A Redis that does not answer must not hang a web request or a worker.
SOCKET_TIMEOUT_S = 5

# What a call to a Redis that is down or stalled can raise. Besides RedisError, redis-py 8
# lets a socket timeout during its connect-time health check surface as
# ValueError("I/O operation on closed file") (seen under load in bench/ingest.py), and
# socket errors can escape as OSError.
REDIS_FAILURES: tuple[type[BaseException], ...] = (redis.RedisError, OSError, ValueError)


_scripts: dict[tuple[str, str], Script] = {}


class ReplicasBehind(redis.RedisError):
    """Fewer replicas than BMS_REDIS_WAIT_REPLICAS acknowledged a write in time: the write may
    not survive a failover, so it must not be answered `ok` (a RedisError: the view's 503)."""


def sentinel_addresses() -> list[tuple[str, int]]:
    out = []
    for item in settings.REDIS_SENTINELS:
        host, _, port = item.rpartition(":")
        out.append((host, int(port)))
    return out


def _db_of(url: str) -> int:
    path = urlparse(url).path.strip("/")
    return int(path) if path.isdigit() else 0


def get_redis() -> redis.Redis:
    url = settings.REDIS_URL
    sentinels = sentinel_addresses()
    master = settings.REDIS_SENTINEL_MASTER
    cache_key = f"{url} {sentinels} {master}"
    client = _clients.get(cache_key)
    if client is None:
        options = {
            "socket_timeout": SOCKET_TIMEOUT_S,
            "socket_connect_timeout": SOCKET_TIMEOUT_S,
            "health_check_interval": 30,
        }
        if sentinels:
            # Each new connection asks the Sentinels for the current primary, so after a
            # failover the pool reconnects to the promoted replica.
            client = Sentinel(
                sentinels,
                socket_timeout=SOCKET_TIMEOUT_S,
                socket_connect_timeout=SOCKET_TIMEOUT_S,
            ).master_for(master, db=_db_of(url), **options)
        else:
            client = redis.Redis.from_url(url, **options)
        _clients[cache_key] = client
    return client


def durably(write: Callable[[redis.Redis], Any]) -> Any:
    """`write(client)` (one script or MULTI, atomic), and with
    BMS_REDIS_WAIT_REPLICAS > 0 a WAIT for that many replicas after it (ReplicasBehind if fewer
    acknowledged in time).

    WAIT counts the writes of the connection that sends it, so the write and the WAIT go over
    one connection held for the call (a pipeline would hand its connection back between
    them)."""
    client = get_redis()
    wanted = int(settings.BMS_REDIS_WAIT_REPLICAS)
    if wanted <= 0:
        return write(client)
    one = redis.Redis(connection_pool=client.connection_pool, single_connection_client=True)
    try:
        result = write(one)
        got = one.execute_command("WAIT", wanted, int(settings.BMS_REDIS_WAIT_MS))
    except BaseException:
        if one.connection is not None:
            one.connection.disconnect()  # never hand a connection mid-MULTI back to the pool
        raise
    finally:
        one.close()
    if got < wanted:
        raise ReplicasBehind(f"{got} of {wanted} Redis replicas acknowledged the write in time")
    return result


def redis_script(source: str) -> Script:
    """A Lua script bound to get_redis(), registered once per process: calling it is one
    EVALSHA (redis-py loads it again by itself after a Redis restart emptied the script
    cache; nothing of the script ran then, so the retry is safe)."""
    key = (settings.REDIS_URL, source)
    found = _scripts.get(key)
    if found is None:
        found = _scripts[key] = get_redis().register_script(source)
    return found
