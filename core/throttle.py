"""Request throttling for the plain-Django endpoints: ingest (/input/*, /api/v1/readings) and
the public reads (/kiosk/*). The DRF views use DRF's own throttles on the same Redis
(settings.REST_FRAMEWORK, CACHES).

A fixed-window counter in Redis (INCR + EXPIRE in one round trip), so the limit holds across
all gunicorn workers. Over the limit: 429 with a JSON message and Retry-After.

Who is counted:
- ingest: the node, only once its key has matched (BMS_THROTTLE_INGEST): a node posting too
  fast is slowed, not its neighbours behind the same NAT, and nobody can spend a node's
  allowance without its key. A missing or wrong key is counted against the client address
  (BMS_THROTTLE_INGEST_FAILED): over that allowance the address gets 429 instead of 401, while
  a good key from the same address is still accepted. The ingest views call `count_failed_key`
  and `ingest_charge` (sensors/ingest/views.py); a node's charge is counted in the same script
  as its request is stored (sensors/ingest/stream.py), so an accepted post is one round trip.
- public: the logged-in user, or the client IP.
- /api/ (DRF): the user, or the client IP as `client_ip` reads it (never a client's own
  X-Forwarded-For unless BMS_TRUSTED_PROXIES says a proxy wrote it).

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
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import throttling

from core.redis import REDIS_FAILURES, redis_script

log = logging.getLogger(__name__)

KEY_PREFIX = "bms:throttle"
_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600,
          "hour": 3600, "d": 86400, "day": 86400}  # fmt: skip
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*$")


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
# and one reply on every request. A Lua function, so that the ingest append can count the
# request in the same script as it stores it (sensors/ingest/stream.py): one round trip.
COUNT_LUA = """
local function count_hit(key, ttl)
  local count = redis.call('INCR', key)
  if count == 1 then redis.call('EXPIRE', key, ttl) end
  return count
end
"""
_COUNT = COUNT_LUA + "return count_hit(KEYS[1], ARGV[1])"


@dataclass(frozen=True)
class Charge:
    """One request to count against `key` (a window's counter): what `hit` does, split so that
    a caller can run the count inside its own script (COUNT_LUA) and read the verdict here."""

    key: str
    limit: int
    ttl_s: int  # the counter outlives its window by a second
    window_end: float

    @classmethod
    def of(cls, scope: str, ident: str, rate: Rate, now: float | None = None) -> Charge:
        now = time.time() if now is None else now
        window = int(now // rate.window_s)
        return cls(
            f"{KEY_PREFIX}:{scope}:{ident}:{window}",
            rate.count,
            rate.window_s + 1,
            float((window + 1) * rate.window_s),
        )

    def wait(self, count: int, now: float | None = None) -> float | None:
        """None if the request that made the counter `count` is allowed, else the seconds
        until the window ends."""
        if count <= self.limit:
            return None
        now = time.time() if now is None else now
        return max(1.0, self.window_end - now)

    def run(self, now: float | None = None) -> float | None:
        """Count it now (one round trip); the wait if over. Redis away: allowed (fail open)."""
        try:
            count = redis_script(_COUNT)(keys=[self.key], args=[self.ttl_s])
        except REDIS_FAILURES as exc:
            log.warning("throttle %s: Redis unavailable, not limiting: %s", self.key, exc)
            return None
        return self.wait(count, now)


def hit(scope: str, ident: str, rate: Rate, now: float | None = None) -> float | None:
    """Count one request; None when allowed, else the seconds until the window ends."""
    return Charge.of(scope, ident, rate, now).run(now)


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind BMS_TRUSTED_PROXIES reverse proxies the address they saw."""
    proxies = settings.BMS_TRUSTED_PROXIES
    if proxies:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [a for a in forwarded if a]
        if forwarded:
            return forwarded[-min(proxies, len(forwarded))][:64]
    return request.META.get("REMOTE_ADDR", "unknown")[:64]


# --- ingest: a node is charged only after its key matched -------------------------------------
# Two counts, so that neither a made-up key nor a node's public key prefix can spend a real
# node's allowance: per client address for requests whose key is missing or wrong, per node
# (its primary key) for requests whose key matched.
INGEST_SCOPE = "ingest"
FAILED_KEY_SCOPE = "ingest-badkey"


def _ingest_rate(setting: str) -> Rate | None:
    return _rate_for(getattr(settings, setting))


def count_failed_key(request: HttpRequest) -> float | None:
    """Count a missing or wrong key against the client address; the wait if it is now over."""
    rate = _ingest_rate("BMS_THROTTLE_INGEST_FAILED")
    if rate is None:
        return None
    return hit(FAILED_KEY_SCOPE, "ip:" + client_ip(request), rate)


def ingest_charge(kind: str, pk: int) -> Charge | None:
    """The charge of one request of a node (`kind` "node") or a site's gateway key ("gateway":
    sensors.models.GatewayKey, the same rate as a node, since one emonhub posts one batch every
    few seconds for all its nodes); None when BMS_THROTTLE_INGEST is off. Not yet counted: the
    ingest views count it with the append (sensors/ingest/stream.py) or alone (`Charge.run`)."""
    rate = _ingest_rate("BMS_THROTTLE_INGEST")
    if rate is None:
        return None
    return Charge.of(INGEST_SCOPE, f"{kind}:{pk}", rate)


def public_ident(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return "ip:" + client_ip(request)


def too_many(scope: str, retry_after: float, reason: str = "too many requests") -> JsonResponse:
    seconds = math.ceil(retry_after)
    response = JsonResponse(
        {"success": False, "error": f"{reason} ({scope}): retry in {seconds} s"}, status=429
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
            rate = _rate_for(getattr(settings, setting))
            if rate is not None:
                retry_after = hit(scope, ident(request), rate)
                if retry_after is not None:
                    return too_many(scope, retry_after)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


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


class _ClientAddress:
    def get_ident(self, request) -> str:
        # DRF's own get_ident with NUM_PROXIES=None counts by the client's X-Forwarded-For as
        # sent: a made-up value per request was never throttled. Ours trusts that header only
        # behind BMS_TRUSTED_PROXIES proxies (the Nth entry from the right), else the socket.
        return client_ip(request)


class AnonRateThrottle(_ClientAddress, _FailOpen, throttling.AnonRateThrottle):
    """Anonymous API requests per client IP (settings BMS_THROTTLE_API_ANON)."""


class UserRateThrottle(_ClientAddress, _FailOpen, throttling.UserRateThrottle):
    """Logged-in API requests per user (settings BMS_THROTTLE_API_USER); per IP if anonymous."""


class PublicRateThrottle(throttling.BaseThrottle):
    """The emoncms feed reads (/feed/*.json, DRF views): the same counter as /kiosk/*."""

    retry_after: float | None = None

    def allow_request(self, request, view) -> bool:
        rate = _rate_for(settings.BMS_THROTTLE_PUBLIC)
        if rate is None:
            return True
        self.retry_after = hit("public", public_ident(request), rate)
        return self.retry_after is None

    def wait(self) -> float | None:
        return self.retry_after
