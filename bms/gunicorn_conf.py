"""gunicorn settings every deployment uses (`gunicorn -c python:bms.gunicorn_conf ...`:
docker/entrypoint.sh, scripts/run-site.sh). Command-line options still override these."""

from __future__ import annotations

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
