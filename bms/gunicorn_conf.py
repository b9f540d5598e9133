"""gunicorn settings every deployment uses (`gunicorn -c python:bms.gunicorn_conf ...`:
docker/entrypoint.sh, scripts/run-site.sh). Command-line options still override these.

The application is loaded once, in the master, and the workers are forked from it: each worker
importing Django, numpy and the apps on its own cost 110-140 MB of private memory a worker;
forked, they share those pages with the master (docs/BENCHMARKS.md, "Footprint"). A worker
that dies or times out is forked again from the loaded master, so it is also back sooner."""

from __future__ import annotations

import gc
from typing import Any

from gunicorn.glogging import Logger

from core.log_scrub import MASK, SENSITIVE_HEADERS, scrub


class GunicornLogger(Logger):
    """gunicorn's logger with every access-log field scrubbed (the request line `%(r)s`, the
    query `%(q)s`, the referer `%(f)s`, any header or environ field a format may name)."""

    def atoms(self, resp, req, environ, request_time) -> dict[str, Any]:
        atoms = super().atoms(resp, req, environ, request_time)
        for name, value in atoms.items():
            if not isinstance(value, str):
                continue
            if name.startswith("{") and name[1:-2] in SENSITIVE_HEADERS:
                atoms[name] = MASK
            else:
                atoms[name] = scrub(value)
        return atoms


# Node keys travel in query strings (emoncms `apikey=`): mask them in the access log.
logger_class = GunicornLogger


preload_app = True

# The listen queue: connections the kernel holds while every worker thread is busy. Each node
# posts on a connection of its own, so at 1,000 posts a second gunicorn's default (2048) is
# 2 s of arrivals; past it the kernel refuses them (5,408 of 30,443 posts at the 10,000-node
# site, docs/BENCHMARKS.md). 4096 is 4 s, and the kernel caps it at net.core.somaxconn
# (4096 since Linux 5.4; raise it on an older kernel, docs/DEPLOYMENT.md). A deeper queue
# would only hold posts longer than a node waits for its answer.
backlog = 4096


def when_ready(server) -> None:
    """In the master, the application loaded, before the first worker is forked."""
    from django.db import connections

    # A connection the loading opened must not be shared by the forked workers.
    connections.close_all()
    # Objects from the import stay in the permanent generation: a worker's collector never
    # writes into them, so their pages stay shared instead of being copied per worker.
    gc.freeze()
