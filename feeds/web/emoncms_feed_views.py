"""emoncms feed paths beyond the reads of feeds/web/views.py: a feed's meta, fields and row
(getmeta, get, aget), creating a feed, writing points (insert, post) and the write buffer's
size. Each answers as emoncms 11.16 answers (Modules/feed/feed_controller.php and
feed_model.php, cited per view); key rules and refusals: feeds/web/emoncms_access.py.
"""

from __future__ import annotations

import math
import re
import time

from django.core.exceptions import ValidationError as ModelValidationError
from django.db import IntegrityError, transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.openapi import ENGINEERS_WRITE, FEED_READERS
from core.parsers import NestedTooDeeply, loads_bounded
from feeds.models import Feed
from feeds.store import phpfina, service
from feeds.store.buffer import RECORD_SIZE
from feeds.web import emoncms_shapes
from feeds.web.emoncms_access import (
    EmoncmsApiView,
    emoncms_error,
    readable_feed,
    require_write,
)
from feeds.web.views import APIKEY, ID, TAGS, _userid

Q = OpenApiParameter.QUERY
# Fields a feed has in emoncms's Redis hash (load_feed_to_redis), for feed/get.json?field=.
FIELDS = ("id", "userid", "name", "tag", "public", "size", "engine", "processList", "unit")
MAX_FIELD_CHARS = 64
# Points one feed/insert.json may carry: a day of 10 s data with room to spare. The body limit
# (DATA_UPLOAD_MAX_MEMORY_SIZE) bounds the bytes; this bounds the work per request.
MAX_INSERT_POINTS = 10_000
MAX_DATA_CHARS = 1_000_000  # what 10,000 points take as JSON text, generously
# emoncms's characters for a feed's name and tag (feed_model.php create: [\p{N}\p{L}_\s\-:]).
NAME_EXTRA = set("_-:")
REFUSALS = {
    400: OpenApiResponse(description='A parameter is bad: {"success": false, "message"} naming it'),
    401: OpenApiResponse(description="No key, or a key that is not a staff API token"),
    403: OpenApiResponse(description="The key may not do this (read-only role, private feed)"),
    404: OpenApiResponse(description='{"success": false, "message": "Feed does not exist"}'),
}


class GetMeta(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/getmeta.json: the file's interval, start and length",
        description="PHPFina::get_meta: `{id, interval, start_time, npoints, end_time}` of the "
        "data file (points still in the write buffer are not counted, as with export.json). "
        "A feed with no data yet: start_time 0, npoints 0, as emoncms's new feed. "
        + FEED_READERS,
        parameters=[ID, APIKEY],
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        examples=[OpenApiExample("meta", response_only=True, value={
            "id": 1, "interval": 10, "start_time": 1714564800, "npoints": 8640,
            "end_time": 1714651190})],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        feed = readable_feed(request, request.query_params.get("id"))
        try:
            return Response(emoncms_shapes.meta(feed))
        except phpfina.CorruptFeed as exc:
            return emoncms_error(f"feed {feed.id}: its files are damaged ({exc})", 409)


class GetField(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/get.json: one field of a feed",
        description="Feed::get_field: `field=` one of " + ", ".join(FIELDS) + ", time or "
        "value; the value as emoncms's Redis hash holds it (a string; time and value as "
        "numbers), `false` for a field a feed does not have. " + FEED_READERS,
        parameters=[ID, OpenApiParameter("field", OpenApiTypes.STR, Q, required=True), APIKEY],
        responses={200: OpenApiResponse(OpenApiTypes.ANY, description="the field's value"),
                   **REFUSALS},
        examples=[OpenApiExample("name", value="power", response_only=True)],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        feed = readable_feed(request, request.query_params.get("id"))
        raw = request.query_params.get("field")
        if not raw:
            return emoncms_error("Missing field parameter", 400, "field")
        if len(raw) > MAX_FIELD_CHARS:
            return emoncms_error(f"field: at most {MAX_FIELD_CHARS} characters", 400, "field")
        field = re.sub(r"[^\w\s\-]", "", raw)  # emoncms strips the rest, then looks it up
        timevalue = emoncms_shapes.timevalues([feed])[feed.id]
        row = emoncms_shapes.row(feed, timevalue, _userid(request))
        # PHP's hget of a missing field is false, and json_encode writes it so
        return Response(row.get(field, False))


class AGet(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/aget.json: every field of a feed",
        description="Feed::get: the feed as one row of feed/list.json. " + FEED_READERS,
        parameters=[ID, APIKEY],
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
    )
    def get(self, request: Request) -> Response:
        feed = readable_feed(request, request.query_params.get("id"))
        timevalue = emoncms_shapes.timevalues([feed])[feed.id]
        return Response(emoncms_shapes.row(feed, timevalue, _userid(request)))


class BufferSize(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/buffersize.json: points waiting in the write buffer",
        description="Feed::get_buffer_size: how many points are buffered in Redis and not yet "
        "released to the files (a bare number). " + ENGINEERS_WRITE,
        parameters=[APIKEY],
        responses={200: OpenApiResponse(OpenApiTypes.INT), **REFUSALS},
        examples=[OpenApiExample("buffered", value=120, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        require_write(request)  # emoncms: `buffersize` && $session['write']
        buffer = service.get_buffer()
        feed_ids = sorted(int(f) for f in buffer.redis.smembers(buffer.dirty_key))
        pipe = buffer.redis.pipeline(transaction=False)
        for feed_id in feed_ids:
            pipe.strlen(buffer.key(feed_id))
        return Response(sum(n // RECORD_SIZE for n in pipe.execute()))


def _name_error(value: str, what: str) -> str:
    if any(not (c.isalnum() or c.isspace() or c in NAME_EXTRA) for c in value):
        return f"invalid characters in feed {what}"  # emoncms's words
    return ""


class Create(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/create.json: a new feed",
        description="Feed::create: `name`, `tag`, `engine` (5, PHPFina: the only engine here; "
        "absent means 5), `options={\"interval\":10}` (seconds, 1-86400), `unit`. Answers "
        "`{success: true, feedid, result: true}`; a tag and name already used: 400 "
        '"feed already exists". ' + ENGINEERS_WRITE,
        parameters=[
            OpenApiParameter("name", OpenApiTypes.STR, Q, required=True),
            OpenApiParameter("tag", OpenApiTypes.STR, Q),
            OpenApiParameter("engine", OpenApiTypes.INT, Q, description="5 (PHPFina)"),
            OpenApiParameter("options", OpenApiTypes.STR, Q, required=True,
                             description='JSON, e.g. {"interval":10}'),
            OpenApiParameter("unit", OpenApiTypes.STR, Q),
            APIKEY,
        ],
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        examples=[OpenApiExample("created", response_only=True,
                                 value={"success": True, "feedid": 12, "result": True})],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        require_write(request)  # emoncms: `create` && $session['write']
        params = request.query_params
        name, tag, unit = params.get("name", ""), params.get("tag", ""), params.get("unit", "")
        for value, what in ((name, "name"), (tag, "tag")):
            if problem := _name_error(value, what):
                return emoncms_error(problem, 400, what)
        engine = params.get("engine") or str(emoncms_shapes.PHPFINA_ENGINE)
        if engine != str(emoncms_shapes.PHPFINA_ENGINE):
            return emoncms_error(
                f"ABORTED: Engine id {engine[:20]} is not supported. Here feeds are PHPFina "
                "(engine 5) only.",
                400,
                "engine",
            )
        interval, problem = _interval(params.get("options"))
        if problem:
            return emoncms_error(problem, 400, "options")
        feed = Feed(name=name, tag=tag, unit=unit, interval=interval)
        try:
            feed.full_clean()
        except ModelValidationError as exc:
            fields = exc.message_dict
            if "__all__" in fields:  # the tag and name constraint
                return emoncms_error("feed already exists", 400, "name")
            field, messages = next(iter(fields.items()))
            return emoncms_error(f"{field}: {messages[0]}", 400, field)
        try:
            with transaction.atomic():
                feed.save()
        except IntegrityError:  # created by someone else since full_clean
            return emoncms_error("feed already exists", 400, "name")
        return Response({"success": True, "feedid": feed.id, "result": True})


def _interval(raw: str | None) -> tuple[int, str]:
    if not raw:
        return 0, 'options: required, e.g. {"interval":10}'
    if len(raw) > 200:
        return 0, "options: at most 200 characters"
    try:
        options = loads_bounded(raw)  # 200 characters: deep enough to hit the depth bound
    except NestedTooDeeply as exc:
        return 0, f"options: {exc}"
    except ValueError:
        return 0, 'options: not JSON, e.g. {"interval":10}'
    value = options.get("interval") if isinstance(options, dict) else None
    if isinstance(value, str) and value.isdigit():
        value = int(value)  # emoncms casts: (int) $options_in->interval
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 86_400:
        return 0, "options: interval must be whole seconds from 1 to 86400"
    return value, ""


class Insert(EmoncmsApiView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/insert.json (and post.json): write points to a feed",
        description="One point: `time` (unix seconds; absent: now) and `value`, answered with "
        "the value (a number), as Feed::post. Several: `data=[[time,value],...]` (query or "
        f"form; at most {MAX_INSERT_POINTS:,} points), answered `{{\"success\": true}}` as "
        "Feed::post_multiple. Points are buffered and committed like processed ones (a point "
        "inside the file overwrites its slot). Every point is checked first: a bad one is a "
        "400 naming it and nothing is written, as is a point the commit would refuse on the "
        "feed's file (before its start further than a prepend may pad, a gap too long): "
        "never answered and then dropped. `join` is not applied. " + ENGINEERS_WRITE,
        parameters=[
            ID,
            OpenApiParameter("time", OpenApiTypes.INT, Q),
            OpenApiParameter("value", OpenApiTypes.NUMBER, Q),
            OpenApiParameter("data", OpenApiTypes.STR, Q, description="[[time,value],...]"),
            APIKEY,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.ANY,
                                        description='the value, or {"success": true}'),
                   **REFUSALS},
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        return self._insert(request)

    @extend_schema(exclude=True)  # the same, with `data` as a form field (emoncms: $_POST)
    def post(self, request: Request) -> Response:
        return self._insert(request)

    def _insert(self, request: Request) -> Response:
        require_write(request)
        feed = readable_feed(request, request.query_params.get("id"))
        params = request.query_params
        now = int(time.time())
        if "time" in params or "value" in params:
            t, problem = _time(params.get("time"), now, "time")
            value, problem = (None, problem) if problem else _value(params.get("value"), "value")
            if problem:
                return emoncms_error(problem[1], 400, problem[0])
            refused = _commit_refusal(feed, [t], now, "time")
            if refused is not None:
                return refused
            service.log_points([(feed.id, t, value)])
            return Response(value)
        raw = params.get("data")
        if raw is None:
            raw = request.POST.get("data")
        if raw is None:
            return emoncms_error("missing data parameter", 400, "data")
        if len(raw) > MAX_DATA_CHARS:
            return emoncms_error(f"data: at most {MAX_DATA_CHARS:,} characters", 400, "data")
        try:
            data = loads_bounded(raw)
        except NestedTooDeeply as exc:  # a RecursionError was a 500
            return emoncms_error(f"data: {exc}", 400, "data")
        except ValueError:
            return emoncms_error("error decoding json", 400, "data")
        if not isinstance(data, list) or not data:
            return emoncms_error("empty data object", 400, "data")
        if len(data) > MAX_INSERT_POINTS:
            return emoncms_error(f"data: at most {MAX_INSERT_POINTS:,} points", 400, "data")
        points = []
        for i, point in enumerate(data):
            if not isinstance(point, list) or len(point) != 2:
                return emoncms_error(f"data[{i}]: must be [time, value]", 400, "data")
            t, problem = _time(point[0], now, f"data[{i}]")
            value, problem = (None, problem) if problem else _value(point[1], f"data[{i}]")
            if problem:
                return emoncms_error(problem[1], 400, "data")
            points.append((feed.id, t, value))
        refused = _commit_refusal(feed, [p[1] for p in points], now, "data")
        if refused is not None:
            return refused
        service.log_points(points)
        return Response({"success": True})


def _commit_refusal(feed: Feed, times: list[int], now: int, field: str) -> Response | None:
    """A 400 naming the first point the commit would refuse on the feed's file (before its
    start further than a prepend may pad, or a gap longer than the file may pad), so no point
    is answered and then dropped (#26); None when the commit keeps them all."""
    refused = service.commit_refusals(feed.id, feed.interval, times, now)
    if not refused:
        return None
    t, reason = refused[0]
    where = f"data[{times.index(t)}]" if field == "data" else "time"
    more = f" ({len(refused)} points refused)" if len(refused) > 1 else ""
    return emoncms_error(f"{where}: time {t} {reason}{more}; nothing was written", 400, field)


def _time(raw, now: int, where: str) -> tuple[int, tuple[str, str] | None]:
    """Unix seconds up to phpfina.MAX_FUTURE_S ahead (a point further on would be refused
    at commit, after the answer); absent: now, as emoncms's time()."""
    if raw is None or raw == "":
        return now, None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return 0, ("time", f"{where}: time {str(raw)[:40]!r} is not unix seconds")
    if not math.isfinite(value) or not 0 <= value <= 0xFFFFFFFF:
        return 0, ("time", f"{where}: time must be unix seconds from 0 to 4294967295")
    if value > now + phpfina.MAX_FUTURE_S:
        return 0, ("time", f"{where}: time is more than {phpfina.MAX_FUTURE_S} s in the future")
    return int(value), None


def _value(raw, where: str) -> tuple[float, tuple[str, str] | None]:
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or abs(value) >= 3.4e38:
        return 0.0, ("value", f"{where}: value {str(raw)[:40]!r} is not a number a feed can "
                     "store (finite, float32)")  # fmt: skip
    return value, None
