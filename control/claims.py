"""Who drives an actuator: refuse claims that contradict each other (issue #15.1).

Zones claim actuators through Zone.actuators (many-to-many), heating plants through their
boiler and pump, solar circuits through their pump. Allowed: zones sharing a circuit pump or a
generic relay (it runs while any of them calls for heat). Refused, because the evaluator would
let one decision silently overwrite the other:
- a radiator valve or valve in two zones (one room's over-temperature OFF would lose to the
  other room's call for heat);
- an actuator that is a plant's boiler or pump, or a solar pump, claimed by anything else.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q

from sensors.models import Actuator

ONE_ZONE_KINDS = {Actuator.Kind.VALVE, Actuator.Kind.RADIATOR}


def conflict(
    actuators: Iterable[Actuator],
    *,
    zone_id: int | None = None,
    plant_id: int | None = None,
    solar_id: int | None = None,
    claimant: str = "zone",
) -> str:
    """Why these actuators cannot be claimed by this zone / plant / solar circuit ("" if they
    can). The ids exclude the claimant's own current row when it is being edited."""
    from control.models import HeatingPlant, SolarCircuit, Zone

    for a in actuators:
        if a is None or a.pk is None:
            continue
        plant = (
            HeatingPlant.objects.exclude(pk=plant_id)
            .filter(Q(boiler_id=a.pk) | Q(pump_id=a.pk))
            .first()
        )
        if plant is not None:
            role = "boiler" if plant.boiler_id == a.pk else "pump"
            return f"Actuator '{a.name}' is already the {role} of heating plant '{plant.name}'."
        solar = SolarCircuit.objects.exclude(pk=solar_id).filter(pump_id=a.pk).first()
        if solar is not None:
            return f"Actuator '{a.name}' is already the pump of solar circuit '{solar.name}'."
        zones = Zone.objects.exclude(pk=zone_id).filter(actuators=a)
        if claimant != "zone":
            other = zones.first()
            if other is not None:
                return f"Actuator '{a.name}' is already driven by zone '{other.name}'."
        elif a.kind in ONE_ZONE_KINDS:
            other = zones.first()
            if other is not None:
                return (
                    f"Valve '{a.name}' already belongs to zone '{other.name}': a valve serves "
                    "one zone (only pumps and relays may be shared, running while any calls)."
                )
    return ""
