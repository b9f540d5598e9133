"""The baseline of bench/ingest.py's single phase: gunicorn with the same workers and threads
answering a POST with a fixed 202 and no Django, Redis or database behind it. What the site's
single posts reach is compared with this, measured on the same machine in the same run."""

from __future__ import annotations

REPLY = b'{"success": true, "rows": 1, "values": 1}'


def application(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    environ["wsgi.input"].read(length)  # read the body, as the site does
    start_response(
        "202 Accepted",
        [("Content-Type", "application/json"), ("Content-Length", str(len(REPLY)))],
    )
    return [REPLY]
