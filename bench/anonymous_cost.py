"""What an anonymous request costs the server (second red-team round, docs/RELIABILITY.md):
CPU seconds of this process per request, in-process through Django's test client, for

  1. GET /api/schema/ (the first request of a process, then the next ones);
  2. GET /healthz from an outside address (the first: a full check; then the cached result);
  3. POST /input/bulk.json?cb=1 of a 4 KB body inflating to 4 MB of JSON rows, with an unknown key,
     then with a node key over its allowance (both refused before anything is inflated), then
     once with a good key (the inflate a key holder may still cause);

and the peak memory (tracemalloc) of reading a dump whose `input` table has a million
columns and a row of a million values, as sensors/emoncms_import/mysqldump.py reads it.

    REDIS_URL=redis://127.0.0.1:6379/14 .venv/bin/python bench/anonymous_cost.py

Uses bms.settings_test with a scratch SQLite database and the Redis db of REDIS_URL (flushed).
"""

from __future__ import annotations

import io
import os
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bms.settings_test")


def cpu_per_call(call: Callable[[], object], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        call()
    return (time.process_time() - start) / n


def main() -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0)
    from core.redis import get_redis
    from sensors import cache
    from sensors.emoncms_import import mysqldump
    from sensors.models import Node
    from tests.wsgi_client import WsgiClient as Client

    get_redis().flushdb()
    cache.clear_all()
    client = Client()
    outside = {"REMOTE_ADDR": "192.0.2.10"}

    first = cpu_per_call(lambda: client.get("/api/schema/", **outside), 1)
    later = cpu_per_call(lambda: client.get("/api/schema/", **outside), 50)
    print(f"/api/schema/: first {first:.3f} s CPU, then {later * 1000:.2f} ms a request")

    first = cpu_per_call(lambda: client.get("/healthz", **outside), 1)
    later = cpu_per_call(lambda: client.get("/healthz", **outside), 200)
    print(f"/healthz anonymous: first {first:.3f} s CPU, then {later * 1000:.2f} ms a request "
          f"(cached {settings.BMS_HEALTHZ_CACHE_S:g} s; the ping also waits up to 1 s)")  # fmt: skip

    node = Node(name="bench", node_id=99)
    key = node.set_new_key()
    node.save()
    # emonhub's shape, raw zlib(JSON) rows, inflating to just under the 4 MiB bound
    rows = b"[" + b"[0,99,1,2,3,4,5]," * (4 * 1_048_576 // 18 - 1) + b"[0,99,1]]"
    bomb = zlib.compress(rows, 9)

    def post(with_key: str) -> object:
        return client.generic(
            "POST", "/input/bulk.json?cb=1", bomb,
            HTTP_AUTHORIZATION=f"Bearer {with_key}", **outside,
        )  # fmt: skip

    settings.BMS_THROTTLE_INGEST_FAILED = "1000000/day"
    unknown = cpu_per_call(lambda: post("f" * 32), 50)
    good = cpu_per_call(lambda: post(key), 3)  # inflated and parsed, then refused: too many rows
    settings.BMS_THROTTLE_INGEST = "1/day"
    post(key)
    throttled = cpu_per_call(lambda: post(key), 50)
    print(
        f"cb=1 bomb ({len(bomb)} bytes -> 4 MiB): unknown key {unknown * 1000:.2f} ms, "
        f"throttled key {throttled * 1000:.2f} ms, good key {good:.3f} s CPU a request"
    )

    columns = b"".join(b"  `c%d` int(11),\n" % i for i in range(1_000_000))
    row = b"INSERT INTO `input` VALUES (" + b"1," * 999_999 + b"1);\n"
    dump = io.BytesIO(b"CREATE TABLE `input` (\n" + columns + b");\n" + row)
    size = len(dump.getvalue())
    tracemalloc.start()
    mysqldump.read_tables(dump, ["input"], problems=[])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"dump of a million columns ({size / 1e6:.1f} MB): peak {peak / 1e6:.2f} MB while read")
    get_redis().flushdb()


if __name__ == "__main__":
    main()
