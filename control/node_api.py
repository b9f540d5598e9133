"""Command queue endpoints for HTTP nodes (node key auth, not staff auth).

GET  /api/v1/nodes/<id>/commands                 -> {"commands": [{"id", "actuator", "coil", "state", ...}]}
POST /api/v1/nodes/<id>/commands/<cmd_id>/ack    -> {"success": true}
     optional JSON body {"ok": false, "error": "relay stuck"} reports a failure instead.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from alarms.lifecycle import clear_alarm, raise_alarm
from alarms.models import Alarm
from control import runtime
from control.drivers import node_queue
from control.models import ActuatorCommand, NodeCommand
from control.node_api_docs import NodeCommandAckDoc, NodeCommandsDoc
from control.runner import alarm_key
from core.api_errors import error_response
from core.openapi import documented_by
from sensors.models import Node

# One answer for "no such node", "node disabled" and "wrong key": they are authentication
# answers, and different ones would tell a caller without a key which node ids exist.
NOT_AUTHENTICATED = "node key not recognised for this node (or the node is disabled)"


def _node(request: HttpRequest, node_id: int) -> Node | JsonResponse:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer ") or not header[7:].strip():
        return error_response("missing node key: send 'Authorization: Bearer <key>'", 401)
    node = Node.objects.filter(pk=node_id, enabled=True).first()
    if node is None or not node.check_key(header[7:].strip()):
        return error_response(NOT_AUTHENTICATED, 401)
    return node


@documented_by(NodeCommandsDoc)
@require_GET
def commands(request: HttpRequest, node_id: int) -> JsonResponse:
    node = _node(request, node_id)
    if isinstance(node, JsonResponse):
        return node
    return JsonResponse(
        {
            "node": node.name,
            "commands": [node_queue.describe(c) for c in node_queue.pending_for(node.pk)],
        }
    )


@documented_by(NodeCommandAckDoc)
@csrf_exempt
@require_POST
def acknowledge(request: HttpRequest, node_id: int, command_id: int) -> JsonResponse:
    node = _node(request, node_id)
    if isinstance(node, JsonResponse):
        return node
    command = (
        NodeCommand.objects.select_related("actuator").filter(pk=command_id, node=node).first()
    )
    if command is None:
        return error_response(f"node {node_id} has no command {command_id}", 404)
    body: dict = {}
    if request.content_type == "application/json" and request.body:
        try:
            body = json.loads(request.body)
        # RecursionError: deeply nested JSON (`[` x 100,000) exhausts the parser's recursion
        # limit; it is the client's malformed body, not a server error.
        except (ValueError, UnicodeDecodeError, RecursionError):
            return error_response("body: not valid JSON", 400, field="body")
        if not isinstance(body, dict):
            return error_response("body: must be a JSON object", 400)
        if "ok" in body and not isinstance(body["ok"], bool):
            return error_response("ok: must be true or false", 400)
        if "error" in body and not isinstance(body["error"], str):
            return error_response("error: must be a string", 400)
    if command.acknowledged_at is not None:
        return JsonResponse({"success": True, "already_acknowledged": True})
    now = timezone.now()
    state = runtime.load_actuators([command.actuator_id])[command.actuator_id]
    if body.get("ok", True) is False:
        message = (body.get("error") or "node reported a failure")[:500]
        command.acknowledged_at = now
        command.save(update_fields=["acknowledged_at"])
        if command.command_id:
            ActuatorCommand.objects.filter(pk=command.command_id).update(error=message)
        state.fault, state.confirmed = message, False
        runtime.save_actuators({command.actuator_id: state})
        raise_alarm(
            alarm_key(command.actuator_id),
            f"Actuator '{command.actuator.name}' did not confirm "
            f"{'ON' if command.state else 'OFF'}: node '{node}' reported: {message}",
            source="relay",
            severity=Alarm.Severity.CRITICAL,
        )
        return JsonResponse({"success": True, "recorded_failure": True})
    node_queue.acknowledge(command, now)
    if not command.superseded:
        state.confirmed, state.fault = True, ""
        if state.on and (
            state.on_confirmed_at is None
            or (state.last_on_at is not None and state.on_confirmed_at < state.last_on_at)
        ):
            state.on_confirmed_at = now.timestamp()
        runtime.save_actuators({command.actuator_id: state})
        clear_alarm(alarm_key(command.actuator_id))
    return JsonResponse({"success": True, "superseded": command.superseded})
