"""Feed data requests shared by the emoncms paths (feeds/web/views.py) and the DRF API
(feeds/web/data_api.py): parameter parsing that names the bad parameter, and who may read what.

Who may read: staff in a role group (engineers, bookers, viewers) and superusers read every
feed; anyone else, anonymous included, reads only feeds marked public. A feed someone may not
read is answered exactly like a feed that does not exist (401 when anonymous, 403 when logged
in without a role), so the answer never tells whether a private feed exists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from rest_framework.authentication import get_authorization_header
from rest_framework.exceptions import (
    AuthenticationFailed,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    ValidationError,
)

from core.authentication import TokenAuth
from core.dates import DEFAULT_TIME_ZONE
from core.permissions import has_staff_role
from feeds.models import Feed
from feeds.store import phpfina, service

MAX_IDS = 50
MAX_ID = 2**63 - 1  # BigAutoField
MAX_INTERVAL_S = 0xFFFFFFFF  # the whole range of PHPFina times
# Larger than any unix time in seconds until the year 5138: such a number is milliseconds.
MS_THRESHOLD = 100_000_000_000
TIMEFORMATS = ("unixms", "unix")
TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


@dataclass
class DataQuery:
    feed_ids: list[int]
    start: int
    end: int
    interval: int | str | None  # None: each feed's own interval
    average: bool = False
    delta: bool = False
    skipmissing: bool = False
    timeformat: str = "unixms"
    timezone: str = DEFAULT_TIME_ZONE


def is_staff_reader(user) -> bool:
    return has_staff_role(user)


def _bad(param: str, message: str) -> ValidationError:
    return ValidationError({param: [message]})


def parse_id(raw: str | None, param: str = "id") -> int:
    if raw is None or raw == "":
        raise _bad(param, "required: a feed id")
    try:
        value = int(raw)
    except ValueError:
        raise _bad(param, f"{raw!r} is not a feed id (a positive integer)") from None
    if value < 1:
        raise _bad(param, "must be a positive integer")
    if value > MAX_ID:  # the database's integer would overflow: a 500 instead of a 404
        raise _bad(param, f"must be at most {MAX_ID}")
    return value


def parse_ids(params: Mapping[str, str], *, keep_repeats: bool = False) -> list[int]:
    """The feeds of `ids=` (or `id=`), at most MAX_IDS; a repeated id once, unless
    `keep_repeats` (emoncms's data.json answers each position, with its own flags)."""
    if params.get("ids"):
        parts = [p for p in params["ids"].split(",") if p.strip()]
        if not parts:
            raise _bad("ids", "give feed ids separated by commas")
        if len(parts) > MAX_IDS:
            raise _bad("ids", f"at most {MAX_IDS} feeds per request")
        ids = [parse_id(p.strip(), "ids") for p in parts]
        return ids if keep_repeats else list(dict.fromkeys(ids))
    if "id" in params:
        return [parse_id(params.get("id"))]
    raise _bad("id", "required: id=<feed id> or ids=<id,id,...>")


def parse_time(params: Mapping[str, str], param: str) -> int:
    raw = params.get(param)
    if raw is None or raw == "":
        raise _bad(param, "required: unix time in seconds or milliseconds")
    try:
        value = float(raw)
    except ValueError:
        raise _bad(param, f"{raw!r} is not a unix time") from None
    if not math.isfinite(value) or value < 0:
        raise _bad(param, f"{raw!r} is not a unix time")
    if value >= MS_THRESHOLD:
        value /= 1000.0
    if value > 0xFFFFFFFF:
        raise _bad(param, f"{raw!r} is beyond the year 2106")
    return int(value)


def parse_bool(params: Mapping[str, str], param: str) -> bool:
    raw = params.get(param)
    if raw is None:
        return False
    raw = raw.strip().lower()
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise _bad(param, f"{raw!r} is not 0/1 or true/false")


def parse_interval(params: Mapping[str, str]) -> int | str | None:
    raw = params.get("interval")
    if raw is None or raw == "":
        return None
    if raw in phpfina.CALENDAR_INTERVALS:
        return raw
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):  # OverflowError: "inf", "1e999"
        raise _bad(
            "interval", f"{raw!r}: use seconds or one of {', '.join(phpfina.CALENDAR_INTERVALS)}"
        ) from None
    if value < 1:
        raise _bad("interval", "must be at least 1 second")
    if value > MAX_INTERVAL_S:  # numpy's int64 window arithmetic would overflow
        raise _bad("interval", f"must be at most {MAX_INTERVAL_S} seconds")
    return value


def parse_timezone(params: Mapping[str, str]) -> str:
    raw = params.get("timezone") or settings.TIME_ZONE
    try:
        ZoneInfo(raw)
    # OSError: a directory ("Europe") or a name too long for the file system.
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _bad("timezone", f"unknown time zone {raw!r} (e.g. Europe/London)") from None
    return raw


def parse_data_query(params: Mapping[str, str], feed_id: int | None = None) -> DataQuery:
    ids = [feed_id] if feed_id is not None else parse_ids(params)
    start = parse_time(params, "start")
    end = parse_time(params, "end")
    if end < start:
        raise _bad("end", "must not be before start")
    timeformat = params.get("timeformat") or "unixms"
    if timeformat not in TIMEFORMATS:
        raise _bad("timeformat", f"{timeformat!r}: use one of {', '.join(TIMEFORMATS)}")
    return DataQuery(
        feed_ids=ids,
        start=start,
        end=end,
        interval=parse_interval(params),
        average=parse_bool(params, "average"),
        delta=parse_bool(params, "delta"),
        skipmissing=parse_bool(params, "skipmissing"),
        timeformat=timeformat,
        timezone=parse_timezone(params),
    )


def readable_feeds(user, feed_ids: list[int]) -> dict[int, Feed]:
    """The feeds, in order, or the 401/403/404 that hides what the user may not see."""
    # Ids past the database's integer range cannot exist (and would overflow the query: a 500).
    feeds = Feed.objects.in_bulk([i for i in feed_ids if 0 < i <= MAX_ID])
    staff = is_staff_reader(user)
    for feed_id in feed_ids:
        feed = feeds.get(feed_id)
        if feed is not None and (staff or feed.public):
            continue
        if staff:
            raise NotFound(f"feed {feed_id} not found")
        if not (user and user.is_authenticated):
            raise NotAuthenticated(f"feed {feed_id}: log in to read it (or it does not exist)")
        raise PermissionDenied(f"feed {feed_id}: your account has no staff role to read it")
    return {i: feeds[i] for i in feed_ids}


def points_budget(user) -> int | None:
    """The bound on the points of all the feeds of one read together: BMS_FEED_MAX_POINTS for
    callers without a staff role (anonymous included), whose reads are otherwise only bounded
    per feed (50 public feeds x 20,000 points: 0.35 s of CPU and 4 MB, #25); None for staff,
    who keep the per-feed bound (their graphs overlay whole feeds; they are few and known)."""
    return None if is_staff_reader(user) else settings.BMS_FEED_MAX_POINTS


def too_many_in_all(total: int | None, feeds: int) -> str:
    return (f"over {total} points in all for the {feeds} feeds asked (the bound of one request "
            "without a staff role): ask fewer feeds, a longer interval or a shorter range")  # fmt: skip


def _windows_asked(query: DataQuery, feeds: dict[int, Feed]) -> int:
    """The windows phpfina.read will compute for these feeds at a uniform interval, from each
    feed's own interval (the file's; a feed with no file yet counts too); 0 for calendar
    intervals, whose count each read checks against what is left."""
    if isinstance(query.interval, str):
        return 0
    total = 0
    for feed in feeds.values():
        fi = max(1, feed.interval)
        step = max(1, round((query.interval or fi) / fi)) * fi
        total += (query.end - query.start // step * step) // step + 1
    return total


def run(
    query: DataQuery, feeds: dict[int, Feed], total_points: int | None = None
) -> dict[int, list[list]]:
    """Each feed's points; with `total_points`, at most that many for all the feeds together,
    each feed refused before it is read once it would not fit in what is left."""
    limit = settings.BMS_FEED_MAX_POINTS
    left = total_points
    if left is not None and _windows_asked(query, feeds) > left:
        # Refused before any feed is read (reading the ones that fit first cost 40 ms).
        raise _bad("interval", too_many_in_all(total_points, len(feeds)))
    out = {}
    # Each feed's buffered points, fetched a group of feeds at a time as the loop reaches them.
    buffered = service.overlays(list(feeds))
    for (feed_id, feed), overlay in zip(feeds.items(), buffered, strict=True):
        interval = query.interval if query.interval is not None else feed.interval
        feed_limit = limit if left is None else min(limit, left)
        # Under a total bound every window computed is charged, kept or not: skipmissing is
        # applied here, after the count, so that empty feeds cost their windows too.
        skip_here = query.skipmissing and left is not None
        try:
            points = service.read(
                feed_id,
                query.start,
                query.end,
                interval,
                average=query.average,
                delta=query.delta,
                skipmissing=query.skipmissing and not skip_here,
                timezone=query.timezone,
                feed_interval=feed.interval,
                max_points=feed_limit,
                overlay=overlay,
            )
        except phpfina.TooManyPoints as exc:
            if feed_limit < limit:
                raise _bad("interval", too_many_in_all(total_points, len(feeds))) from None
            raise _bad("interval", f"{exc}: use a longer interval or a shorter range") from None
        except phpfina.BadReadRequest as exc:
            raise _bad(exc.param, str(exc)) from None
        if left is not None:
            left -= len(points)
        if skip_here:
            points = [p for p in points if p[1] is not None]
        if query.timeformat == "unix":
            for point in points:
                point[0] //= 1000
        out[feed_id] = points
    return out


class BearerAuthentication(TokenAuth):
    """`Authorization: Bearer <staff token>`, as emoncms clients send their key; a key that is
    not a staff token is a 401, as with `apikey=`."""

    def authenticate(self, request):
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != b"bearer":
            return None
        if len(auth) != 2:
            raise AuthenticationFailed("Invalid Bearer header: give one key after Bearer.")
        return self.authenticate_credentials(auth[1])

    def authenticate_header(self, request):
        return "Bearer"


class ApiKeyQueryAuthentication(TokenAuth):
    """emoncms clients pass their key as `?apikey=`: accept a staff API token there too."""

    def authenticate(self, request):
        key = request.query_params.get("apikey")
        if not key:
            return None
        return self.authenticate_credentials(key)
