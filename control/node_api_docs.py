"""OpenAPI documentation of the node command queue (control/node_api.py, docs/CONTROL.md).

Plain Django views authenticated by the node's key; these APIViews only carry their
documentation into /api/schema/ (core/openapi.py `documented_by`). Never routed.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.views import APIView

from core.openapi import NODE_KEY, NodeKeyBearer

ERROR = inline_serializer(
    "NodeCommandError",
    {"success": serializers.BooleanField(default=False), "error": serializers.CharField()},
)
NOT_AUTHENTICATED = OpenApiResponse(
    ERROR, description="No key, wrong key, no such node or node disabled (one answer for all)."
)
COMMANDS = inline_serializer(
    "NodeCommand",
    {
        "id": serializers.IntegerField(),
        "actuator": serializers.CharField(),
        "actuator_id": serializers.IntegerField(),
        "coil": serializers.IntegerField(allow_null=True),
        "state": serializers.BooleanField(),
        "value": serializers.IntegerField(help_text="1 on, 0 off"),
        "issued": serializers.DateTimeField(),
    },
    many=True,
)


class NodeCommandsDoc(APIView):
    authentication_classes = [NodeKeyBearer]
    permission_classes: list = []

    @extend_schema(
        operation_id="node_commands_list",
        tags=["node-commands"],
        summary="Pending actuator commands for this node",
        description="An HTTP node polls this and switches its relays, then acknowledges each "
        "command. " + NODE_KEY + " The key must be this node's.",
        responses={
            200: inline_serializer(
                "NodeCommands",
                {"node": serializers.CharField(), "commands": COMMANDS},
            ),
            401: NOT_AUTHENTICATED,
        },
        examples=[
            OpenApiExample(
                "one pending",
                value={"node": "boiler-house", "commands": [
                    {"id": 41, "actuator": "Boiler 1", "actuator_id": 4, "coil": 0,
                     "state": True, "value": 1, "issued": "2030-01-07T06:30:00+00:00"}]},
                response_only=True,
            )
        ],
    )  # fmt: skip
    def get(self, request, node_id: int):  # pragma: no cover - documentation only
        raise NotImplementedError


class NodeCommandAckDoc(APIView):
    authentication_classes = [NodeKeyBearer]
    permission_classes: list = []

    @extend_schema(
        operation_id="node_command_acknowledge",
        tags=["node-commands"],
        summary="Acknowledge (or report the failure of) a command",
        description="Without a body, or with {\"ok\": true}: done, the actuator is confirmed. "
        "{\"ok\": false, \"error\": \"...\"} records the failure and raises a critical alarm. "
        "Acknowledging twice is harmless. " + NODE_KEY,
        request=inline_serializer(
            "NodeCommandAck",
            {"ok": serializers.BooleanField(required=False, default=True),
             "error": serializers.CharField(required=False, max_length=500)},
        ),
        responses={
            200: inline_serializer(
                "NodeCommandAcked",
                {"success": serializers.BooleanField(),
                 "superseded": serializers.BooleanField(required=False),
                 "already_acknowledged": serializers.BooleanField(required=False),
                 "recorded_failure": serializers.BooleanField(required=False)},
            ),
            400: OpenApiResponse(ERROR, description="Body not JSON, or a field of the wrong type."),
            401: NOT_AUTHENTICATED,
            404: OpenApiResponse(ERROR, description="This node has no such command."),
        },
        examples=[
            OpenApiExample("relay stuck", value={"ok": False, "error": "relay stuck"},
                           request_only=True),
            OpenApiExample("done", value={"success": True, "superseded": False},
                           response_only=True),
        ],
    )  # fmt: skip
    def post(self, request, node_id: int, command_id: int):  # pragma: no cover - docs only
        raise NotImplementedError
