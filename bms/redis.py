"""One Redis connection pool per process, from settings.REDIS_URL."""

from __future__ import annotations

import redis
from django.conf import settings
from redis.commands.core import Script

_clients: dict[str, redis.Redis] = {}

# A Redis that does not answer must not hang a web request or a worker.
SOCKET_TIMEOUT_S = 5

# What a call to a Redis that is down or stalled can raise. Besides RedisError, redis-py 8
# lets a socket timeout during its connect-time health check surface as
# ValueError("I/O operation on closed file") (seen under load in bench/ingest.py), and
# socket errors can escape as OSError.
REDIS_FAILURES: tuple[type[BaseException], ...] = (redis.RedisError, OSError, ValueError)


_scripts: dict[tuple[str, str], Script] = {}


def get_redis() -> redis.Redis:
    url = settings.REDIS_URL
    client = _clients.get(url)
    if client is None:
        client = redis.Redis.from_url(
            url,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            health_check_interval=30,
        )
        _clients[url] = client
    return client


def redis_script(source: str) -> Script:
    """A Lua script bound to get_redis(), registered once per process: calling it is one
    EVALSHA (redis-py loads it again by itself after a Redis restart emptied the script
    cache; nothing of the script ran then, so the retry is safe)."""
    key = (settings.REDIS_URL, source)
    found = _scripts.get(key)
    if found is None:
        found = _scripts[key] = get_redis().register_script(source)
    return found
