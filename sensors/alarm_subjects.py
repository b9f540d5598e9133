"""Which sensors, nodes, keys and sites still give their alarms a cause (alarms/subjects.py):
an alarm about a removed object, or a rule taken away, is cleared by the watchdog's sweep."""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import Q

from alarms.subjects import register
from core.redis import get_redis


def _sensors_with_a_range(ids: Collection[int]) -> list[int]:
    from sensors.models import Sensor

    has_range = Q(min_valid__isnull=False) | Q(max_valid__isnull=False)
    return list(Sensor.objects.filter(has_range, pk__in=ids).values_list("pk", flat=True))


def _range_cleared(ids: list[int]) -> None:
    # The ingest worker raises a range alarm only for a sensor not in this set (processing.py).
    from sensors.ingest import node_state as state

    get_redis().srem(state.RANGE_ALARMS_KEY, *ids)


def _enabled_nodes(ids: Collection[int]) -> list[int]:
    from sensors.models import Node

    return list(Node.objects.filter(pk__in=ids, enabled=True).values_list("pk", flat=True))


def _silent_cleared(ids: list[int]) -> None:
    from sensors.ingest import node_state as state

    get_redis().srem(state.SILENT_KEY, *ids)


def _existing(model_name: str):
    def still(ids: Collection[int]) -> list[int]:
        from django.apps import apps

        model = apps.get_model("sensors", model_name)
        return list(model.objects.filter(pk__in=ids).values_list("pk", flat=True))

    return still


def register_all() -> None:
    register("sensor-range", _sensors_with_a_range, _range_cleared)
    register("node-silent", _enabled_nodes, _silent_cleared)
    register("node-input-errors", _existing("Node"))
    register("modbus-meter", _enabled_nodes)
    register("modbus-register", _existing("Node"))
    register("bacnet-device", _enabled_nodes)
    register("bacnet-point", _existing("Node"))
    register("gateway-nodes-silent", _existing("GatewayKey"))
    register("gateway-input-errors", _existing("GatewayKey"))
    register("inputs-capped", _existing("Site"))
    register("relay", _existing("Actuator"))
