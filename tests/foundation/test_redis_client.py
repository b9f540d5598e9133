"""The Redis client packs commands and parses replies in C (hiredis, requirements.txt).

redis-py takes hiredis by itself when it is installed, and falls back to its pure-Python
packer and parser, silently, when it is not: a lost install step would cost the drain about a
third of its CPU a request (docs/BENCHMARKS.md) and no test would fail for it but this one."""

from __future__ import annotations

from redis.utils import HIREDIS_AVAILABLE

from core.redis import get_redis


def test_the_client_packs_and_parses_with_hiredis():
    # redis-py's documented rule: hiredis is used whenever it can be imported.
    import hiredis

    assert HIREDIS_AVAILABLE
    assert hiredis.__version__.startswith("3.")
    assert get_redis().ping() is True
