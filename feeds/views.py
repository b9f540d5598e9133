"""emoncms-compatible feed reads: /feed/list.json, /feed/timevalue.json, /feed/data.json.

Same parameters and reply shapes as emoncms, so its graphs, apps and scripts work unchanged
(see docs/FEEDS.md). Access rules and parameter parsing: feeds/query.py.
"""

from __future__ import annotations

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

from bms.authentication import TokenAuth
from bms.openapi import FEED_READERS
from bms.throttle import PublicRateThrottle
from feeds import phpfina, query, service
from feeds.data_api import DATA_PARAMETERS, ERRORS
from feeds.models import Feed

PHPFINA_ENGINE = 5  # emoncms's engine number for PHPFina


class EmoncmsView(APIView):
    # Anyone may ask; feeds/query.py decides per feed (public feeds are readable anonymously).
    permission_classes = [AllowAny]
    authentication_classes = [
        query.ApiKeyQueryAuthentication,
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


TAGS = ["emoncms-compatible", "feeds"]
Q = OpenApiParameter.QUERY
ID = OpenApiParameter("id", OpenApiTypes.INT, Q, required=True, description="feed id")
APIKEY = OpenApiParameter("apikey", OpenApiTypes.STR, Q, description="staff API token")
FEED_ROWS = inline_serializer(
    "EmoncmsFeed",
    {
        "id": serializers.IntegerField(),
        "name": serializers.CharField(),
        "tag": serializers.CharField(),
        "unit": serializers.CharField(),
        "public": serializers.BooleanField(),
        "engine": serializers.IntegerField(help_text="5: PHPFina"),
        "interval": serializers.IntegerField(),
        "size": serializers.IntegerField(help_text="bytes on disk; -1 if unreadable"),
        "time": serializers.IntegerField(allow_null=True),
        "value": serializers.FloatField(allow_null=True),
    },
    many=True,
)


class FeedList(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/list.json: feeds with their last value",
        description="Every feed for staff; only public feeds for anyone else (no 401/403). "
        + FEED_READERS,
        parameters=[APIKEY],
        responses={200: FEED_ROWS},
        examples=[
            OpenApiExample(
                "one feed",
                value=[{"id": 1, "name": "power", "tag": "emontx-pv", "unit": "W",
                        "public": False, "engine": 5, "interval": 10, "size": 34560,
                        "time": 1714564800, "value": 1520.5}],
                response_only=True,
            )
        ],
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        feeds = Feed.objects.all()
        if not query.is_staff_reader(request.user):
            feeds = feeds.filter(public=True)
        feeds = list(feeds)
        last = service.last_values(f.id for f in feeds)
        out = []
        for feed in feeds:
            t, v = last.get(feed.id, (None, None))
            out.append(
                {
                    "id": feed.id,
                    "name": feed.name,
                    "tag": feed.tag,
                    "unit": feed.unit,
                    "public": feed.public,
                    "engine": PHPFINA_ENGINE,
                    "interval": feed.interval,
                    "size": _size(feed.id),
                    "time": t,
                    "value": v,
                }
            )
        return Response(out)


def _size(feed_id: int) -> int:
    try:
        return phpfina.npoints(service.feed_dir(), feed_id) * phpfina.VALUE_SIZE
    except phpfina.CorruptFeed:
        return -1


class TimeValue(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/timevalue.json: last time and value",
        description="The newest point of one feed (null, null if it has none). " + FEED_READERS,
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
        query.readable_feeds(request.user, [feed_id])
        last = service.last_value(feed_id)
        if last is None:
            return Response({"time": None, "value": None})
        return Response({"time": last[0], "value": last[1]})


class Data(EmoncmsView):
    @extend_schema(
        tags=TAGS,
        summary="emoncms feed/data.json: points of one or several feeds",
        description="With `id`: a list of [time, value]. With `ids=1,2`: "
        "[{feedid, data}, ...]. Parameters as emoncms (docs/FEEDS.md#reading). " + FEED_READERS,
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
                description="[[time, value], ...] for `id`; [{feedid, data}, ...] for `ids`",
            ),
            **ERRORS,
        },
        examples=[
            OpenApiExample(
                "id=1&start=1714564800&end=1714566000&interval=600&average=1",
                value=[[1714564800000, 1520.5], [1714565400000, 1498.0],
                       [1714566000000, None]],
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
    def get(self, request: Request) -> Response:
        params = request.query_params
        q = query.parse_data_query(params)
        feeds = query.readable_feeds(request.user, q.feed_ids)
        series = query.run(q, feeds)
        if "ids" in params and params.get("ids"):
            return Response([{"feedid": i, "data": d} for i, d in series.items()])
        return Response(series[q.feed_ids[0]])
