"""Request throttling for the plain-Django endpoints: ingest (/input/*, /api/v1/readings) and
the public reads (/kiosk/*). The DRF views use DRF's own throttles on the same Redis
(settings.REST_FRAMEWORK, CACHES).

A fixed-window counter in Redis (INCR + EXPIRE in one round trip), so the limit holds across
all gunicorn workers. Over the limit: 429 with a JSON message and Retry-After.

Who is counted:
- ingest: the node key's first 8 characters (a node posting too fast is slowed, not its
  neighbours behind the same NAT), or the client IP when the request carries no key;
- public: the logged-in user, or the client IP.

If Redis does not answer, requests are let through: throttling protects the site, it must not
take ingest down with it (the Celery broker failing is reported by the view itself).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import throttling

from bms.redis import REDIS_FAILURES, redis_script

log = logging.getLogger(__name__)

KEY_PREFIX = "bms:throttle"
NODE_KEY_PREFIX_CHARS = 8  # as sensors.keys.PREFIX_LENGTH (bms/ must not import the apps)
_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600,
          "hour": 3600, "d": 86400, "day": 86400}  # fmt: skip
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


@dataclass(frozen=True)
class Rate:
    count: int
    window_s: int


def parse_rate(text: str | None) -> Rate | None:
    """`"6000/minute"`, `"100/s"`, `"500/10s"`; empty, `"off"` or `"0"` turns the limit off."""
    if text is None or text.strip().lower() in ("", "off", "none", "0"):
        return None
    match = _RATE.match(text.lower())
    unit = _UNITS.get(match.group(3)) if match else None
    if match is None or unit is None:
        raise ValueError(f"throttle rate {text!r}: use e.g. 6000/minute, 100/second or off")
    return Rate(int(match.group(1)), int(match.group(2) or 1) * unit)


@functools.lru_cache(maxsize=32)
def _rate_for(text: str | None) -> Rate | None:
    return parse_rate(text)


# Count one request in its window's counter, which expires just after the window: one command
# and one reply on every ingest request.
_COUNT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


def hit(scope: str, ident: str, rate: Rate, now: float | None = None) -> float | None:
    """Count one request; None when allowed, else the seconds until the window ends."""
    now = time.time() if now is None else now
    window = int(now // rate.window_s)
    key = f"{KEY_PREFIX}:{scope}:{ident}:{window}"
    try:
        count = redis_script(_COUNT)(keys=[key], args=[rate.window_s + 1])
    except REDIS_FAILURES as exc:
        log.warning("throttle %s: Redis unavailable, not limiting: %s", scope, exc)
        return None
    if count <= rate.count:
        return None
    return max(1.0, (window + 1) * rate.window_s - now)


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind BMS_TRUSTED_PROXIES reverse proxies the address they saw."""
    proxies = getattr(settings, "BMS_TRUSTED_PROXIES", 0)
    if proxies:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [a for a in forwarded if a]
        if forwarded:
            return forwarded[-min(proxies, len(forwarded))][:64]
    return request.META.get("REMOTE_ADDR", "unknown")[:64]


def _visible_key(request: HttpRequest) -> str | None:
    """The node key where the ingest views will look for it, without reading a big body."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    key = request.GET.get("apikey") or request.GET.get("devicekey")
    if key:
        return key
    form = request.content_type == "application/x-www-form-urlencoded"
    if request.method == "POST" and form and request.GET.get("cb") != "1":
        try:  # the view reads the same parsed form; too big or too many fields: its 4xx
            return request.POST.get("apikey") or request.POST.get("devicekey")
        except SuspiciousOperation:
            return None
    return None


def ingest_ident(request: HttpRequest) -> str:
    key = _visible_key(request)
    prefix = key.strip()[:NODE_KEY_PREFIX_CHARS] if key else ""
    if _HEX.match(prefix):
        return "key:" + prefix.lower()
    return "ip:" + client_ip(request)


def public_ident(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return "ip:" + client_ip(request)


def too_many(scope: str, retry_after: float) -> JsonResponse:
    seconds = math.ceil(retry_after)
    response = JsonResponse(
        {"success": False, "error": f"too many requests ({scope}): retry in {seconds} s"},
        status=429,
    )
    response["Retry-After"] = str(seconds)
    return response


def throttle(
    scope: str, setting: str, ident: Callable[[HttpRequest], str]
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorate a view: at most settings.<setting> requests per window per `ident(request)`."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            rate = _rate_for(getattr(settings, setting, None))
            if rate is not None:
                retry_after = hit(scope, ident(request), rate)
                if retry_after is not None:
                    return too_many(scope, retry_after)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def ingest_throttle(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    return throttle("ingest", "BMS_THROTTLE_INGEST", ingest_ident)(view)


def public_throttle(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    return throttle("public", "BMS_THROTTLE_PUBLIC", public_ident)(view)


# --- DRF ---------------------------------------------------------------------------------------
# /api/v1/: DRF's own throttles, counting in the Django cache (Redis, settings.CACHES) so every
# gunicorn worker shares the count; subclassed only to let requests through when Redis is down.


class _FailOpen:
    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)  # type: ignore[misc]
        except REDIS_FAILURES as exc:
            log.warning("API throttle: Redis unavailable, not limiting: %s", exc)
            return True


class AnonRateThrottle(_FailOpen, throttling.AnonRateThrottle):
    """Anonymous API requests per client IP (settings BMS_THROTTLE_API_ANON)."""


class UserRateThrottle(_FailOpen, throttling.UserRateThrottle):
    """Logged-in API requests per user (settings BMS_THROTTLE_API_USER)."""


class PublicRateThrottle(throttling.BaseThrottle):
    """The emoncms feed reads (/feed/*.json, DRF views): the same counter as /kiosk/*."""

    retry_after: float | None = None

    def allow_request(self, request, view) -> bool:
        rate = _rate_for(getattr(settings, "BMS_THROTTLE_PUBLIC", None))
        if rate is None:
            return True
        self.retry_after = hit("public", public_ident(request), rate)
        return self.retry_after is None

    def wait(self) -> float | None:
        return self.retry_after
