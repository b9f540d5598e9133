"""Keep credentials out of the logs: query-string values of sensitive parameters are masked.

emonhub and emoncms clients put the node key in the URL (`/input/post?apikey=...`), so every
access-log line carried a working write key (934 `apikey=` lines in one red-team log). Two
places write request lines: gunicorn's access log (`bms.gunicorn_conf.GunicornLogger`)
and Django's loggers (`ScrubSecretsFilter` on the handlers in settings.LOGGING; runserver's
`django.server` lines include the query string).

A parameter is sensitive when its name contains one of SENSITIVE_WORDS (case-insensitive):
`apikey`, `devicekey`, `key`, `token`, `password`, `secret`, ... The value is replaced by
MASK; the name stays, so a log still shows that a key was sent.
"""

from __future__ import annotations

import logging
import re

MASK = "***"
SENSITIVE_WORDS = ("key", "token", "passw", "pwd", "secret", "auth", "session", "signature", "csrf")
# Headers whose whole value is a credential, should an access-log format name them.
SENSITIVE_HEADERS = ("authorization", "cookie", "x-api-key", "proxy-authorization")

# name=value in a query string or form body: the name runs to '=', the value to the next
# separator ('&', ';', whitespace, a quote) so a request line's " HTTP/1.1" stays intact.
_PARAM = re.compile(r"(?P<name>[^\s?&;=\"']+)=(?P<value>[^\s&;\"']*)")
_SENSITIVE = re.compile("|".join(re.escape(w) for w in SENSITIVE_WORDS), re.IGNORECASE)


def _mask(match: re.Match[str]) -> str:
    name = match.group("name")
    if match.group("value") and _SENSITIVE.search(name):
        return f"{name}={MASK}"
    return match.group(0)


def scrub(text: str) -> str:
    """`text` with the values of sensitive `name=value` pairs masked."""
    if "=" not in text:
        return text
    return _PARAM.sub(_mask, text)


class ScrubSecretsFilter(logging.Filter):
    """A logging filter that masks sensitive parameter values in the formatted message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a broken format string: let logging report it as it would
        scrubbed = scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        return True
