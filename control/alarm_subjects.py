"""Which zones, plants, boards and solar circuits still exist for their alarms
(alarms/subjects.py): an alarm about a deleted one is cleared by the watchdog's sweep, as no
tick will ever look at it again."""

from __future__ import annotations

from collections.abc import Collection

from alarms.subjects import register


def _existing(model_name: str):
    def still(ids: Collection[int]) -> list[int]:
        from django.apps import apps

        model = apps.get_model("control", model_name)
        return list(model.objects.filter(pk__in=ids).values_list("pk", flat=True))

    return still


def register_all() -> None:
    for prefix in ("zone-valves", "zone-sensor", "ical", "ical-capped"):
        register(prefix, _existing("Zone"))
    for prefix in ("plant-circuit", "plant-outside", "plant-flow", "plant-output"):
        register(prefix, _existing("HeatingPlant"))
    register("relay-watchdog", _existing("RelayBoard"))
    register("solar-sensor", _existing("SolarCircuit"))
