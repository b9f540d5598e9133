"""A refused permission is one log line, not a traceback.

Django logs every PermissionDenied ("Forbidden (Permission denied): /path") at WARNING with
the exception attached, so each viewer who clicks an engineer's button wrote a 20-line
traceback into the log, burying real errors (#25). The refusal is expected behaviour: the
line says who was refused where; the stack says nothing more.
"""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied


class PermissionDeniedOneLine(logging.Filter):
    """Drops the traceback of a PermissionDenied record (the record itself is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PermissionDenied):
            record.exc_info = None
            record.exc_text = None
        return True
