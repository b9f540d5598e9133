"""HTTP node command queue: commands wait in the database until the node fetches them
(`GET /api/v1/nodes/<id>/commands`) and acknowledges each one
(`POST /api/v1/nodes/<id>/commands/<cmd_id>/ack`). The acknowledgement is the confirmation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from control.models import ActuatorCommand, NodeCommand
from sensors.models import Actuator


@dataclass(frozen=True)
class QueueTarget:
    actuator_id: int
    node_id: int
    state: bool
    command_id: int | None  # the ActuatorCommand audit row


def enqueue(targets: list[QueueTarget], now: datetime) -> None:
    """Queue the commands; an older unacknowledged one for the same actuator is superseded
    (the node only needs the latest state)."""
    if not targets:
        return
    with transaction.atomic():
        NodeCommand.objects.filter(
            actuator_id__in=[t.actuator_id for t in targets],
            acknowledged_at__isnull=True,
            superseded=False,
        ).update(superseded=True)
        NodeCommand.objects.bulk_create(
            NodeCommand(
                node_id=t.node_id,
                actuator_id=t.actuator_id,
                state=t.state,
                command_id=t.command_id,
                created=now,
            )
            for t in targets
        )


def pending_for(node_id: int) -> list[NodeCommand]:
    return list(
        NodeCommand.objects.filter(node_id=node_id, acknowledged_at__isnull=True, superseded=False)
        .select_related("actuator")
        .order_by("created", "id")
    )


def acknowledge(command: NodeCommand, now: datetime | None = None) -> None:
    now = now or timezone.now()
    command.acknowledged_at = now
    command.save(update_fields=["acknowledged_at"])
    if command.command_id:
        ActuatorCommand.objects.filter(pk=command.command_id, confirmed_at__isnull=True).update(
            confirmed_at=now
        )


def overdue(now: datetime, timeout_s: int) -> list[NodeCommand]:
    """Commands still waiting for their node after `timeout_s`."""
    return list(
        NodeCommand.objects.filter(
            acknowledged_at__isnull=True,
            superseded=False,
            created__lt=now - timedelta(seconds=timeout_s),
        ).select_related("actuator", "node")
    )


def describe(command: NodeCommand) -> dict:
    actuator: Actuator = command.actuator
    return {
        "id": command.pk,
        "actuator": actuator.name,
        "actuator_id": actuator.pk,
        "coil": actuator.coil,
        "state": command.state,
        "value": 1 if command.state else 0,
        "issued": command.created.isoformat(),
    }
