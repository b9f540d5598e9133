"""The floor of any design where the web appends a post to a Redis stream before it answers:
bench/gunicorn_alone.py plus one XADD through redis-py, the client library the
site uses, and nothing else (no Django, no key check, no parsing). bench/ingest.py measures it
beside gunicorn alone and the site in the same run: whatever the site does per post comes on
top of this, so no site that keeps "in the stream before `ok`" can answer faster."""

from __future__ import annotations

import os

from redis import Redis

REPLY = b'{"success": true, "rows": 1, "values": 1}'
STREAM = "bench:xadd-floor"  # in bench/ingest.py's scratch Redis db, flushed by it

redis = Redis.from_url(os.environ["REDIS_URL"])


def application(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    redis.xadd(STREAM, {"b": body}, maxlen=10_000, approximate=True)
    start_response(
        "202 Accepted",
        [("Content-Type", "application/json"), ("Content-Length", str(len(REPLY)))],
    )
    return [REPLY]
