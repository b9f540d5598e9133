"""emoncms-compatible feed reads: /feed/list.json, timevalue, value, fetch, data, csvexport, export.

Same parameters and reply shapes as emoncms, so its graphs, apps and scripts work unchanged
(see docs/FEEDS.md). Access rules and parameter parsing: feeds/web/query.py.
"""

from __future__ import annotations

from django.http import JsonResponse, StreamingHttpResponse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.authentication import TokenAuth
from core.openapi import FEED_READERS
from core.throttle import PublicRateThrottle
from feeds.emoncms import params as emoncms_api
from feeds.models import Feed
from feeds.store import phpfina, service
from feeds.web import emoncms_shapes, query
from feeds.web.data_api import ERRORS


class EmoncmsView(APIView):
    # Anyone may ask; feeds/web/query.py decides per feed (public feeds are readable anonymously).
    permission_classes = [AllowAny]
    authentication_classes = [
        query.ApiKeyQueryAuthentication,
        query.BearerAuthentication,
        TokenAuth,
        SessionAuthentication,
    ]
    renderer_classes = [JSONRenderer]
    throttle_classes = [PublicRateThrottle]  # one count with /kiosk/*, per IP or user


class ApiKeyQueryScheme(OpenApiAuthenticationExtension):
    """`?apikey=<staff token>` on /feed/*: named in the schema as its own scheme."""

    target_class = query.ApiKeyQueryAuthentication
    name = "staffTokenQuery"
    priority = 1  # before knox's header scheme, which would match the subclass

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "query", "name": "apikey",
                "description": "A staff API token given as `apikey=` (emoncms clients)."}  # fmt: skip


class BearerScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <staff token>` on /feed/*: emoncms clients send their key so."""

    target_class = query.BearerAuthentication
    name = "staffTokenBearer"
    priority = 1  # before knox's header scheme, which would match the subclass

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A staff API token as `Authorization: Bearer` (emoncms clients)."}  # fmt: skip


TAGS = ["emoncms-compatible", "feeds"]
Q = OpenApiParameter.QUERY
ID = OpenApiParameter("id", OpenApiTypes.INT, Q, required=True, description="feed id")
APIKEY = OpenApiParameter("apikey", OpenApiTypes.STR, Q, description="staff API token")
FEED_ROWS = inline_serializer(
    "EmoncmsFeed",
    {
        "id": serializers.CharField(help_text="the feed id, as a string (emoncms)"),
        "userid": serializers.CharField(help_text="the asking user's id; 0 when anonymous"),
        "name": serializers.CharField(),
        "tag": serializers.CharField(),
        "public": serializers.CharField(help_text='"1" or "0"'),
        "size": serializers.CharField(help_text="bytes on disk; -1 if unreadable"),
        "engine": serializers.CharField(help_text='"5": PHPFina'),
        "processList": serializers.CharField(help_text="always empty (no virtual feeds)"),
        "unit": serializers.CharField(),
        "time": serializers.IntegerField(allow_null=True, help_text="start of the last slot"),
        "value": serializers.FloatField(allow_null=True, help_text="its value as stored (float32)"),
    },
    many=True,
)


def _userid(request: Request) -> int:
    """emoncms's `userid` of a feed is its owner's: here feeds belong to the site, so a list
    names the account that asked (0 for anonymous), steady for one client's key."""
    return request.user.pk if request.user and request.user.is_authenticated else 0


class FeedList(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/list.json: feeds with their last value",
        description="Every feed for staff; only public feeds for anyone else (no 401/403). "
        "Shaped as emoncms's (its Redis hash: every field a string but time and value); "
        "`meta=1` adds start_time, end_time, interval and npoints of each file. "
        + FEED_READERS,
        parameters=[APIKEY, OpenApiParameter("meta", OpenApiTypes.INT, Q,
                                             description="1: add each file's meta")],
        responses={200: FEED_ROWS},
        examples=[
            OpenApiExample(
                "one feed",
                value=[{"id": "1", "userid": "2", "name": "power", "tag": "emontx-pv",
                        "public": "0", "size": "34560", "engine": "5", "processList": "",
                        "unit": "W", "time": 1714564800, "value": 1520.5}],
                response_only=True,
            )
        ],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        feeds = Feed.objects.all()
        if not query.is_staff_reader(request.user):
            feeds = feeds.filter(public=True)
        feeds = list(feeds)
        last = emoncms_shapes.timevalues(feeds)
        with_meta = request.query_params.get("meta") == "1"
        userid = _userid(request)
        return Response(
            [emoncms_shapes.row(f, last[f.id], userid, with_meta=with_meta) for f in feeds]
        )


class TimeValue(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/timevalue.json: last time and value",
        description="The newest point of one feed as emoncms's PHPFina lastvalue gives it: the "
        "start of its slot and the value as stored (float32); null, null if it has none. "
        + FEED_READERS,
        parameters=[ID, APIKEY],
        responses={
            200: inline_serializer(
                "EmoncmsTimeValue",
                {"time": serializers.IntegerField(allow_null=True),
                 "value": serializers.FloatField(allow_null=True)},
            ),
            **ERRORS,
        },
        examples=[
            OpenApiExample("last value", value={"time": 1714564800, "value": 1520.5},
                           response_only=True)
        ],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        feed_id = query.parse_id(request.query_params.get("id"))
        feed = query.readable_feeds(request.user, [feed_id])[feed_id]
        # Redis's last value, else the file's (an imported feed), as emoncms's get_timevalue
        t, v = emoncms_shapes.timevalues([feed])[feed.id]
        return Response({"time": t, "value": v})


DATA_PARAMETERS = [
    OpenApiParameter("start", OpenApiTypes.NUMBER, Q, required=True,
                     description="Unix time, seconds or milliseconds (above 10^11)"),
    OpenApiParameter("end", OpenApiTypes.NUMBER, Q, required=True,
                     description="Unix time, seconds or milliseconds; after start"),
    OpenApiParameter("interval", OpenApiTypes.STR, Q,
                     description="Seconds between window starts, from `start` itself; 0 or "
                     "absent: about 800 points; `original`: the feed's own; or daily / weekly / "
                     "monthly / annual (local calendar in `timezone`). `mode` is an alias."),
    OpenApiParameter("average", OpenApiTypes.STR, Q,
                     description="1: mean of each window's recorded slots (else the slot at the "
                     "window's start); with ids, one 0/1 per feed"),
    OpenApiParameter("delta", OpenApiTypes.STR, Q,
                     description="1: the next window's value minus this one's (kWh per day from "
                     "a cumulative kWh feed); with ids, one 0/1 per feed"),
    OpenApiParameter("skipmissing", OpenApiTypes.BOOL, Q, description="Leave out null points"),
    OpenApiParameter("limitinterval", OpenApiTypes.BOOL, Q,
                     description="1: raise the interval to the feed's and round it to whole slots"),
    OpenApiParameter("timeformat", OpenApiTypes.STR, Q, enum=list(emoncms_api.TIMEFORMATS),
                     description="unixms (default), unix, excel (d/m/Y H:i:s), iso8601, or "
                     "notime (values only)"),
    OpenApiParameter("csv", OpenApiTypes.BOOL, Q, description="1: a CSV download"),
    OpenApiParameter("dp", OpenApiTypes.INT, Q,
                     description=f"Round values to this many decimals (-1: off, at most "
                     f"{emoncms_api.MAX_DP})"),
    OpenApiParameter("timezone", OpenApiTypes.STR, Q,
                     description="Zone of calendar windows and excel/iso8601 times "
                     "(default TIME_ZONE)"),
]  # fmt: skip


def _data_response(request: Request, *, csv: bool = False, average: bool = False):
    params = request.query_params
    if average:
        # emoncms's feed/average.json (feed_controller.php, "Backwards compatibility"): data
        # with $average = 1 from the first feed on, whatever `average=` says.
        params = params.copy()
        params["average"] = "1"
    req = emoncms_api.parse_data_request(params, csv=csv)
    feeds = query.readable_feeds(request.user, req.feed_ids)
    if req.csv and len(req.feed_ids) == 1:
        ((feed_id, series),) = emoncms_api.read_series(req, feeds, csv_single=True)
        return _csv_download(emoncms_api.csv_single_rows(series, req), str(feed_id))
    # CSV has its own bound on the whole file (BMS_FEED_MAX_CSV_ROWS); JSON, for callers
    # without a staff role, one on the points of all the feeds together (#25).
    budget = None if req.csv else query.points_budget(request.user)
    all_series = emoncms_api.read_series(req, feeds, total_points=budget)
    if req.csv:
        name = "-".join(str(i) for i, _ in all_series)
        return _csv_download(emoncms_api.csv_multi_rows([s for _, s in all_series], req), name)
    if not req.many:
        return Response(emoncms_api.json_points(all_series[0][1], req))
    return Response([{"feedid": i, "data": emoncms_api.json_points(s, req)} for i, s in all_series])


def _csv_download(rows, name: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    response["Cache-Control"] = "no-cache, no-store, must-revalidate"
    return response


class Data(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/data.json: points of one or several feeds",
        description="As emoncms's engine computes them (docs/FEEDS.md, emoncms read semantics): "
        "windows from `start`, averages, delta, calendar windows across DST days, time formats, "
        "CSV. With `id`: [[time, value], ...]. With `ids=1,2`: [{feedid, data}, ...]. "
        + FEED_READERS,
        parameters=[
            OpenApiParameter("id", OpenApiTypes.INT, Q, description="one feed id"),
            OpenApiParameter("ids", OpenApiTypes.STR, Q,
                             description=f"feed ids separated by commas (at most {query.MAX_IDS})"),
            *DATA_PARAMETERS,
            APIKEY,
        ],
        responses={
            200: OpenApiResponse(
                OpenApiTypes.ANY,
                description="[[time, value], ...] for `id`; [{feedid, data}, ...] for `ids`; "
                "[value, ...] with timeformat=notime; text/csv with csv=1",
            ),
            **ERRORS,
        },
        examples=[
            OpenApiExample(
                "id=1&start=1714564805&end=1714566000&interval=600&average=1",
                value=[[1714564805000, 1520.5], [1714565405000, 1498.0]],
                response_only=True,
            ),
            OpenApiExample(
                "ids=1,2",
                value=[{"feedid": 1, "data": [[1714564800000, 1520.5]]},
                       {"feedid": 2, "data": [[1714564800000, 21.4]]}],
                response_only=True,
            ),
        ],
    )  # fmt: skip
    def get(self, request: Request):
        return _data_response(request)


class Average(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/average.json: data.json with every window averaged",
        description="emoncms 11.16 still answers this older path: feed/data.json with "
        "`average=1` for every feed (an `average=` given is ignored, as there). " + FEED_READERS,
        parameters=[
            OpenApiParameter("id", OpenApiTypes.INT, Q, description="one feed id"),
            OpenApiParameter("ids", OpenApiTypes.STR, Q,
                             description=f"feed ids separated by commas (at most {query.MAX_IDS})"),
            *[p for p in DATA_PARAMETERS if p.name != "average"],
            APIKEY,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.ANY, description="as feed/data.json"),
                   **ERRORS},
    )  # fmt: skip
    def get(self, request: Request):
        return _data_response(request, average=True)


class CsvExport(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/csvexport.json: data.json as a CSV download",
        description="`time,value` rows (times in unix seconds unless timeformat=excel or "
        "iso8601; values with 2 decimals, `null` where missing); with `ids`, one column per "
        "feed. At most BMS_FEED_MAX_CSV_ROWS rows in all. " + FEED_READERS,
        parameters=[
            OpenApiParameter("id", OpenApiTypes.INT, Q, description="one feed id"),
            OpenApiParameter("ids", OpenApiTypes.STR, Q, description="feed ids, commas"),
            *DATA_PARAMETERS,
            APIKEY,
        ],
        responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS},
    )
    def get(self, request: Request):
        return _data_response(request, csv=True)


class Value(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/value.json: the last value, or the value at a time",
        description="Without `time` (or time=0): the feed's last value. With `time` (unix "
        "seconds): the value of the slot nearest that time, null when missing. "
        + FEED_READERS,
        parameters=[
            ID,
            OpenApiParameter("time", OpenApiTypes.INT, Q, description="unix seconds"),
            APIKEY,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.NUMBER, description="a number or null"),
                   **ERRORS},
        examples=[OpenApiExample("value", value=1520.5, response_only=True)],
    )  # fmt: skip
    def get(self, request: Request) -> JsonResponse:
        params = request.query_params
        feed_id = query.parse_id(params.get("id"))
        t = _parse_seconds(params.get("time"), "time")
        feed = query.readable_feeds(request.user, [feed_id])[feed_id]
        if not t:
            last = service.emoncms_timevalues([feed_id]).get(feed_id)
            # the same last value as timevalue.json: as stored (float32), as emoncms's feed hash
            return JsonResponse(emoncms_shapes.stored_value(last), safe=False)
        return JsonResponse(service.value_at(feed_id, t, feed_interval=feed.interval), safe=False)


def _parse_seconds(raw: str | None, param: str, top: int = 0xFFFFFFFF) -> int:
    """A whole number from 0 to `top` (unix seconds by default: PHPFina's range)."""
    if raw is None or raw.strip() == "":
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise query.ValidationError({param: [f"{raw[:40]!r} is not a whole number"]}) from None
    if not 0 <= value <= top:
        raise query.ValidationError({param: [f"must be 0 to {top}"]})
    return value


class Fetch(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/fetch.json: last values of several feeds",
        description="One entry per id, in the order asked: the last value, null when the feed "
        "has none, false when it does not exist or you may not read it (as emoncms). "
        + FEED_READERS,
        parameters=[
            OpenApiParameter("ids", OpenApiTypes.STR, Q, required=True,
                             description=f"feed ids, commas (at most {query.MAX_IDS})"),
            APIKEY,
        ],
        responses={200: OpenApiResponse(OpenApiTypes.ANY, description="[value|null|false, ...]"),
                   **ERRORS},
        examples=[OpenApiExample("three feeds", value=[1520.5, None, False], response_only=True)],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        raw = request.query_params.get("ids")
        if not raw:
            raise query.ValidationError({"ids": ["required: feed ids separated by commas"]})
        parts = [p.strip() for p in raw.split(",") if p.strip()]
        if not parts:
            raise query.ValidationError({"ids": ["give feed ids separated by commas"]})
        if len(parts) > query.MAX_IDS:
            raise query.ValidationError({"ids": [f"at most {query.MAX_IDS} feeds per request"]})
        ids = [query.parse_id(p, "ids") for p in parts]  # repeats kept: one answer per id asked
        feeds = Feed.objects.in_bulk(set(ids))
        staff = query.is_staff_reader(request.user)
        readable = [i for i in ids if i in feeds and (staff or feeds[i].public)]
        last = service.emoncms_timevalues(readable)
        return Response(
            [emoncms_shapes.stored_value(last.get(i)) if i in readable else False for i in ids]
        )


class Export(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/export.json: the raw PHPFina data file",
        description="The feed's `.dat` (float32 little-endian, NaN = missing) from byte offset "
        "`start`, rounded down to a whole value and one value earlier (so the last value a "
        "copy holds is sent again), as emoncms's backup and sync modules resume. Points still "
        "in the write buffer are not in the file yet. " + FEED_READERS,
        parameters=[
            ID,
            OpenApiParameter("start", OpenApiTypes.INT, Q,
                             description="byte offset to resume from (0: the whole file)"),
            APIKEY,
        ],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, **ERRORS},
    )  # fmt: skip
    def get(self, request: Request):
        params = request.query_params
        feed_id = query.parse_id(params.get("id"))
        offset = _parse_seconds(params.get("start"), "start", top=2**62)  # a byte offset
        query.readable_feeds(request.user, [feed_id])
        offset = offset // phpfina.VALUE_SIZE * phpfina.VALUE_SIZE
        if offset >= phpfina.VALUE_SIZE:
            offset -= phpfina.VALUE_SIZE  # emoncms: the first point is updated, not appended
        response = StreamingHttpResponse(
            _file_chunks(phpfina.dat_path(service.feed_dir(feed_id), feed_id), offset),
            content_type="application/octet-stream",
        )
        response["Content-Disposition"] = f'attachment; filename="{feed_id}.dat"'
        response["Cache-Control"] = "no-cache, no-store, must-revalidate"
        return response


def _file_chunks(path, offset: int, size: int = 1 << 16):
    """The file from `offset`, in chunks: memory stays at one chunk however large the feed.
    The descriptor keeps the inode it opened, so a prepend's rename mid-stream is harmless."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    with fh:
        fh.seek(offset)
        while chunk := fh.read(size):
            yield chunk
