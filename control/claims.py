"""Who drives an actuator: refuse claims that contradict each other (two drivers
of one relay flip it every tick).

Zones claim actuators through Zone.actuators (many-to-many), heating plants through their
boiler and pump, solar circuits through their pump. Allowed: zones sharing a circuit pump or a
generic relay (it runs while any of them calls for heat). Refused, because the evaluator would
let one decision silently overwrite the other:
- a radiator valve or valve in two zones (one room's over-temperature OFF would lose to the
  other room's call for heat);
- an actuator that is a plant's boiler or pump, a solar pump, a heat main's source or a thermal
  store's pump, claimed by anything else.

The control models are read through the app registry (`apps.get_model`): their clean() calls
this module, so importing control.models here would make the two modules import each other.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.apps import apps
from django.db.models import Q

from sensors.models import Actuator, same_board_hosts, unresolved_note

ONE_ZONE_KINDS = {Actuator.Kind.VALVE, Actuator.Kind.RADIATOR}


def conflict(
    actuators: Iterable[Actuator],
    *,
    zone_id: int | None = None,
    plant_id: int | None = None,
    solar_id: int | None = None,
    claimant: str = "zone",
    heat_source_id: int | None = None,
    store_id: int | None = None,
) -> str:
    """Why these actuators cannot be claimed by this zone / plant / solar circuit ("" if they
    can). The ids exclude the claimant's own current row when it is being edited."""
    HeatingPlant, SolarCircuit, WeatherCompensation, Zone = (
        apps.get_model("control", name)
        for name in ("HeatingPlant", "SolarCircuit", "WeatherCompensation", "Zone")
    )

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
        valve = (
            WeatherCompensation.objects.exclude(plant_id=plant_id)
            .filter(Q(open_actuator_id=a.pk) | Q(close_actuator_id=a.pk))
            .select_related("plant")
            .first()
        )
        if valve is not None:
            return (
                f"Actuator '{a.name}' is already a three-point valve relay of heating plant "
                f"'{valve.plant.name}'."
            )
        source = (
            apps.get_model("control", "HeatSource")
            .objects.exclude(pk=heat_source_id)
            .filter(actuator_id=a.pk)
            .select_related("heat_main")
            .first()
        )
        if source is not None:
            return (
                f"Actuator '{a.name}' is already heat source '{source.name}' of heat main "
                f"'{source.heat_main.name}'."
            )
        store = (
            apps.get_model("control", "ThermalStore")
            .objects.exclude(pk=store_id)
            .filter(Q(charge_pump_id=a.pk) | Q(discharge_pump_id=a.pk))
            .first()
        )
        if store is not None:
            role = "charge" if store.charge_pump_id == a.pk else "discharge"
            return (
                f"Actuator '{a.name}' is already the {role} pump of thermal store '{store.name}'."
            )
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


def register_conflict(
    host: str,
    port: int,
    device_id: int,
    register: int | None,
    *,
    plant_id: int | None = None,
    board_id: int | None = None,
) -> str:
    """Why a holding register cannot be written by this output or relay board ("" if it can).

    Two weather-compensation outputs on one register would fight (two PI loops on one 0-10 V
    output), and an output on a relay board's watchdog register overwrites the board's timeout
    with a valve position every tick, so the board may never drop its relays when the server
    dies (outside test, session 6). The ids exclude the claimant's own row when it is edited."""
    RelayBoard = apps.get_model("control", "RelayBoard")
    WeatherCompensation = apps.get_model("control", "WeatherCompensation")

    if register is None:
        return ""
    host = (host or "").strip().lower()
    # The board is what the host names (sensors/models.py board_host), not its spelling: a
    # register typed as "localhost" is the one already claimed as "127.0.0.1".
    outputs = {
        w.pk: w
        for w in WeatherCompensation.objects.exclude(plant_id=plant_id)
        .filter(
            output=WeatherCompensation.Output.REGISTER,
            register_port=port,
            register_device_id=device_id,
            register_address=register,
        )
        .select_related("plant")
    }
    same, mine = same_board_hosts(host, {pk: w.register_host for pk, w in outputs.items()})
    note = unresolved_note(mine)
    if same:
        output = outputs[min(same)]
        return (
            f"Holding register {register} of unit {device_id} on {host}:{port} is already the "
            f"output of heating plant '{output.plant.name}'{_alias(output.register_host, host)}: "
            f"two writers would fight.{note}"
        )
    boards = {
        b.pk: b
        for b in RelayBoard.objects.exclude(pk=board_id).filter(
            port=port, device_id=device_id, watchdog_register=register
        )
    }
    same, _ = same_board_hosts(host, {pk: b.host for pk, b in boards.items()})
    if same:
        board = boards[min(same)]
        return (
            f"Holding register {register} of unit {device_id} on {host}:{port} is the watchdog "
            f"register of relay board '{board.name}'{_alias(board.host, host)}: writing anything "
            f"else there would change the board's timeout.{note}"
        )
    return ""


def board_conflict(host: str, port: int, device_id: int, *, board_id: int | None = None) -> str:
    """Why a relay board cannot be saved at this address ("" if it can): another board is
    already the same board and unit, whatever the host is spelt ("localhost" for "127.0.0.1"):
    two rows would write one watchdog register with two values."""
    RelayBoard = apps.get_model("control", "RelayBoard")

    boards = {
        b.pk: b
        for b in RelayBoard.objects.exclude(pk=board_id).filter(port=port, device_id=device_id)
    }
    same, mine = same_board_hosts(host, {pk: b.host for pk, b in boards.items()})
    if not same:
        return ""
    board = boards[min(same)]
    return (
        f"Unit {device_id} on {mine.name}:{port} is already relay board '{board.name}'"
        f"{_alias(board.host, mine.name)}.{unresolved_note(mine)}"
    )


def _alias(saved: str, typed: str) -> str:
    saved = (saved or "").strip().lower()
    return "" if saved == typed.strip().lower().removesuffix(".") else f" (as {saved})"
