"""OpenAPI documentation of the ingest endpoints (sensors/ingest/views.py, docs/INGEST.md).

The views are plain Django views (the hot path, emoncms answers); these APIViews only carry
their documentation into /api/schema/ (core/openapi.py `documented_by`, `add_plain_views`).
They are never routed, so they serve nothing.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.views import APIView

from core.openapi import NODE_KEY, NODE_OR_GATEWAY_KEY, NodeKeyBearer, NodeKeyQuery

Q = OpenApiParameter.QUERY

INGEST_ERROR = inline_serializer(
    "IngestError",
    {
        "success": serializers.BooleanField(default=False),
        "error": serializers.CharField(),
        "field": serializers.CharField(required=False, help_text="the field at fault"),
        "row": serializers.IntegerField(required=False, help_text="0-based row of a batch"),
    },
)


def _error(text: str) -> OpenApiResponse:
    return OpenApiResponse(INGEST_ERROR, description=text)


ERRORS = {
    400: _error("Bad input, refused whole; `field` (and `row`) name it."),
    401: _error("No key, key not recognised, or node disabled (`field: apikey`)."),
    403: _error("The key's node is not the node named (`field: node`)."),
    405: _error("Wrong HTTP method."),
    413: _error("Body over BMS_MAX_BODY_BYTES, or too many rows/values."),
    429: _error("Node rate or the address's failed-key allowance spent; see Retry-After."),
    503: _error("Ingest queue or database unavailable: retry."),
}

READING = inline_serializer(
    "Reading",
    {
        "node": serializers.CharField(
            required=False, help_text="node name or radio id; must be the key's own node"
        ),
        "time": serializers.CharField(
            required=False,
            help_text="unix seconds or ISO 8601 with a zone; default: server time",
        ),
        "values": serializers.DictField(
            child=serializers.FloatField(), help_text="{key: number}, keys 1-64 of A-Za-z0-9_-."
        ),
    },
)

READING_LIST = serializers.ListSerializer(child=READING, help_text="up to 2,500 readings")

OK_TEXT = OpenApiResponse(
    OpenApiTypes.STR,
    description='Exactly `ok` (text/plain); `{"success": true}` when `fulljson` was used.',
    examples=[OpenApiExample("ok", value="ok", response_only=True)],
)


class ReadingsDoc(APIView):
    authentication_classes = [NodeKeyBearer]
    permission_classes: list = []

    @extend_schema(
        operation_id="readings_create",
        tags=["ingest"],
        summary="Post readings from a node (REST)",
        description=(
            "One reading, or a JSON list of up to 2,500 readings. Accepted once validated and "
            "queued (202); the worker maps each value to its sensor and feed. Any bad value "
            "refuses the whole request with a 4xx naming the field. A reading that would create "
            "an input beyond the node's bound is a 409. " + NODE_KEY + " A gateway key is "
            "refused here (403): use /input/bulk. docs/INGEST.md"
        ),
        request={
            "application/json": PolymorphicProxySerializer(
                component_name="Readings",
                serializers=[READING, READING_LIST],
                resource_type_field_name=None,
                many=False,
            )
        },
        responses={
            202: inline_serializer(
                "ReadingsAccepted",
                {
                    "success": serializers.BooleanField(),
                    "rows": serializers.IntegerField(),
                    "values": serializers.IntegerField(),
                },
            ),
            409: _error("Would create inputs beyond the auto-created input bound."),
            **ERRORS,
        },
        examples=[
            OpenApiExample(
                "one reading",
                value={"values": {"power1": 120.5, "vrms": 241.2}},
                request_only=True,
            ),
            OpenApiExample(
                "a batch",
                value=[
                    {"node": "emontx2", "time": "2024-05-01T12:00:00Z", "values": {"power1": 120}},
                    {"time": 1714564810, "values": {"power1": 118}},
                ],
                request_only=True,
            ),
            OpenApiExample(
                "accepted",
                value={"success": True, "rows": 2, "values": 3},
                response_only=True,
                status_codes=["202"],
            ),
            OpenApiExample(
                "bad value",
                value={
                    "success": False,
                    "error": "values.t1: value 'abc' is not numeric",
                    "field": "values.t1",
                    "row": 1,
                },
                response_only=True,
                status_codes=["400"],
            ),
        ],
    )
    def post(self, request):  # pragma: no cover - documentation only
        raise NotImplementedError


KEY_PARAMETERS = [
    OpenApiParameter("apikey", OpenApiTypes.STR, Q, description="node or gateway key"),
    OpenApiParameter("devicekey", OpenApiTypes.STR, Q, description="alias of apikey"),
]
POST_PARAMETERS = [
    OpenApiParameter("node", OpenApiTypes.STR, Q, description="node name or radio id"),
    OpenApiParameter(
        "fulljson", OpenApiTypes.STR, Q, description='JSON object, e.g. {"power1":100}'
    ),
    OpenApiParameter("json", OpenApiTypes.STR, Q, description="emoncms loose {power1:100}"),
    OpenApiParameter("csv", OpenApiTypes.STR, Q, description="100,200,300 -> keys 1, 2, 3"),
    OpenApiParameter("time", OpenApiTypes.NUMBER, Q, description="unix seconds (default now)"),
    *KEY_PARAMETERS,
]
POST_FORM = inline_serializer(
    "InputPostForm",
    {
        "node": serializers.CharField(required=False),
        "fulljson": serializers.CharField(required=False),
        "json": serializers.CharField(required=False),
        "csv": serializers.CharField(required=False),
        "time": serializers.FloatField(required=False),
        "apikey": serializers.CharField(required=False),
    },
)
INPUT_POST = dict(
    tags=["emoncms-compatible", "ingest"],
    summary="emoncms input/post: one reading",
    description=(
        "emoncms-compatible single reading (emonTx, emonPi, ESP firmware post here unchanged). "
        "Values from one of `fulljson`, `json` or `csv`, as query or form parameters; as "
        'emoncms, `null` is 0 and numeric text (`"23.5"`) its number; other text skips that '
        "value only (recorded as an input error). Replies exactly `ok`. "
        + NODE_OR_GATEWAY_KEY
        + " Also at /input/post.json. "
        "docs/INGEST.md"
    ),
    parameters=POST_PARAMETERS,
    responses={200: OK_TEXT, **ERRORS},
    examples=[
        OpenApiExample(
            "fulljson form",
            value={"node": "emontx2", "fulljson": '{"power1":100,"vrms":241}'},
            request_only=True,
        ),
    ],
)


class InputPostDoc(APIView):
    authentication_classes = [NodeKeyBearer, NodeKeyQuery]
    permission_classes: list = []

    @extend_schema(**INPUT_POST)
    def get(self, request):  # pragma: no cover - documentation only
        raise NotImplementedError

    @extend_schema(
        request={"application/x-www-form-urlencoded": POST_FORM},
        **INPUT_POST,
    )
    def post(self, request):  # pragma: no cover - documentation only
        raise NotImplementedError


BULK_PARAMETERS = [
    OpenApiParameter(
        "data", OpenApiTypes.STR, Q, description="[[t, node, v1 | {name: v}, ...], ...] as JSON"
    ),
    OpenApiParameter("sentat", OpenApiTypes.NUMBER, Q, description="sender's clock: row t + now - sentat"),
    OpenApiParameter("offset", OpenApiTypes.NUMBER, Q, description="as sentat"),
    OpenApiParameter("time", OpenApiTypes.NUMBER, Q, description="row t + time (0: absolute)"),
    OpenApiParameter("cb", OpenApiTypes.STR, Q, description="body is raw zlib(JSON) (emonhub)"),
    OpenApiParameter("c", OpenApiTypes.STR, Q, description="data is hex of zlib(JSON)"),
    OpenApiParameter("fulljson", OpenApiTypes.STR, Q, description='reply {"success": true}'),
    *KEY_PARAMETERS,
]  # fmt: skip
BULK_FORM = inline_serializer(
    "InputBulkForm",
    {
        "data": serializers.CharField(help_text="[[t, node, v1, v2 | {name: v}, ...], ...]"),
        "sentat": serializers.FloatField(required=False),
        "time": serializers.FloatField(required=False),
        "apikey": serializers.CharField(required=False),
    },
)
INPUT_BULK = dict(
    tags=["emoncms-compatible", "ingest"],
    summary="emoncms input/bulk: many rows, many nodes",
    description=(
        "emoncms-compatible batch, what emonhub sends: `data=[[t, node, v1, v2, ...], ...]` "
        "(form or query), `cb` for a raw zlib body, `c` for hex. Row times follow emoncms "
        "(sentat / offset / time); as emoncms, `null` is 0 and numeric text its number. Other "
        "bad values and unusable rows are skipped and recorded as "
        "input errors, the rest is queued, and the reply stays `ok` (emonhub resends anything "
        "else forever). " + NODE_OR_GATEWAY_KEY + " A gateway key writes any node of its site. "
        "Also at /input/bulk.json. docs/INGEST.md"
    ),
    parameters=BULK_PARAMETERS,
    responses={200: OK_TEXT, **ERRORS},
    examples=[
        OpenApiExample(
            "two rows, 10 s apart",
            value={"data": '[[0,12,100,200],[10,12,101,{"temp":21.5}]]', "sentat": 10},
            request_only=True,
        ),
    ],
)


class InputBulkDoc(APIView):
    authentication_classes = [NodeKeyBearer, NodeKeyQuery]
    permission_classes: list = []

    @extend_schema(**INPUT_BULK)
    def get(self, request):  # pragma: no cover - documentation only
        raise NotImplementedError

    @extend_schema(
        request={
            "application/x-www-form-urlencoded": BULK_FORM,
            "application/octet-stream": OpenApiTypes.BINARY,
        },
        **INPUT_BULK,
    )
    def post(self, request):  # pragma: no cover - documentation only
        raise NotImplementedError
