"""Feed data under /api/v1/feeds/ (DRF, in the OpenAPI schema): the emoncms reads, typed.

GET /api/v1/feeds/data?ids=1,2&start=&end=...   -> [{"id": 1, "data": [[t, v], ...]}, ...]
GET /api/v1/feeds/<id>/data?start=&end=...      -> {"id": 1, "data": [[t, v], ...]}
GET /api/v1/feeds/<id>/timevalue                -> {"id": 1, "time": t, "value": v}
Access: feeds/web/query.py (staff read all, anyone reads public feeds).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.openapi import FEED_READERS
from feeds.store import service
from feeds.web import query

Q = OpenApiParameter.QUERY
DATA_PARAMETERS = [
    OpenApiParameter("start", OpenApiTypes.NUMBER, Q, required=True,
                     description="Unix time, seconds or milliseconds"),
    OpenApiParameter("end", OpenApiTypes.NUMBER, Q, required=True,
                     description="Unix time, seconds or milliseconds (inclusive)"),
    OpenApiParameter("interval", OpenApiTypes.STR, Q,
                     description="Seconds between points (rounded to whole feed slots; default "
                     "the feed's own interval) or daily / weekly / monthly (local calendar)"),
    OpenApiParameter("average", OpenApiTypes.BOOL, Q,
                     description="Mean of the recorded slots of each window (else the first slot)"),
    OpenApiParameter("delta", OpenApiTypes.BOOL, Q,
                     description="Increase per window of a cumulative feed (e.g. kWh per day)"),
    OpenApiParameter("skipmissing", OpenApiTypes.BOOL, Q,
                     description="Leave out windows with no value instead of null"),
    OpenApiParameter("timeformat", OpenApiTypes.STR, Q, enum=list(query.TIMEFORMATS),
                     description="unixms (default) or unix seconds"),
    OpenApiParameter("timezone", OpenApiTypes.STR, Q,
                     description="Time zone of daily/weekly/monthly windows (default TIME_ZONE)"),
]  # fmt: skip
POINTS = serializers.ListField(
    child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
    help_text="[[time, value or null], ...]",
)


class FeedSeriesSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    data = POINTS


TIMEVALUE = inline_serializer(
    "FeedTimeValue",
    {
        "id": serializers.IntegerField(),
        "time": serializers.IntegerField(allow_null=True),
        "value": serializers.FloatField(allow_null=True),
    },
)
ERRORS = {
    400: OpenApiResponse(description="A parameter is bad; the message names it"),
    401: OpenApiResponse(description="Not logged in, and the feed is not public (or absent)"),
    403: OpenApiResponse(description="Logged in without a staff role; the feed is not public"),
    404: OpenApiResponse(description="No such feed (staff only: others get 401/403)"),
}


class FeedDataBase(APIView):
    permission_classes = [AllowAny]  # per-feed rule in feeds/web/query.py


class FeedData(FeedDataBase):
    @extend_schema(
        operation_id="feeds_data_read",
        summary="Data of one feed",
        description="Points of one feed between start and end, optionally averaged or "
        "differenced per interval (docs/FEEDS.md#reading). " + FEED_READERS,
        parameters=DATA_PARAMETERS,
        examples=[
            OpenApiExample(
                "10-minute means",
                value={"id": 1, "data": [[1714564800000, 1520.5], [1714565400000, None]]},
                response_only=True,
            )
        ],
        responses={200: FeedSeriesSerializer, **ERRORS},
        tags=["feeds"],
    )
    def get(self, request: Request, pk: int) -> Response:
        q = query.parse_data_query(request.query_params, feed_id=pk)
        feeds = query.readable_feeds(request.user, q.feed_ids)
        return Response({"id": pk, "data": query.run(q, feeds)[pk]})


class FeedsData(FeedDataBase):
    @extend_schema(
        operation_id="feeds_data_many",
        summary="Data of several feeds",
        description="The same window for several feeds at once, in the order asked. "
        + FEED_READERS,
        examples=[
            OpenApiExample(
                "two feeds",
                value=[
                    {"id": 1, "data": [[1714564800000, 1520.5]]},
                    {"id": 2, "data": [[1714564800000, 21.4]]},
                ],
                response_only=True,
            )
        ],
        parameters=[
            OpenApiParameter(
                "ids",
                OpenApiTypes.STR,
                Q,
                required=True,
                description=f"Feed ids separated by commas (at most {query.MAX_IDS})",
            ),
            *DATA_PARAMETERS,
        ],  # fmt: skip
        responses={200: FeedSeriesSerializer(many=True), **ERRORS},
        tags=["feeds"],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        if not params.get("ids"):
            raise query.ValidationError({"ids": ["required: feed ids separated by commas"]})
        q = query.parse_data_query(params)
        feeds = query.readable_feeds(request.user, q.feed_ids)
        series = query.run(q, feeds, total_points=query.points_budget(request.user))
        return Response([{"id": i, "data": d} for i, d in series.items()])


class FeedTimeValue(FeedDataBase):
    @extend_schema(
        operation_id="feeds_timevalue",
        summary="Last time and value of a feed",
        description="The newest point, including points not yet committed to disk. " + FEED_READERS,
        examples=[
            OpenApiExample(
                "last value",
                value={"id": 1, "time": 1714564800, "value": 1520.5},
                response_only=True,
            )
        ],
        responses={200: TIMEVALUE, **ERRORS},
        tags=["feeds"],
    )
    def get(self, request: Request, pk: int) -> Response:
        query.readable_feeds(request.user, [pk])
        t, v = service.last_value(pk) or (None, None)
        return Response({"id": pk, "time": t, "value": v})
