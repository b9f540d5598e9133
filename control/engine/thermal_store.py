"""A heat main's thermal store: charged from the main's sources by its top and bottom
temperatures, discharged to the main's zones when it is hot enough (as RESOL's store
controllers and a Siemens RVD's buffer-store function do it).

- **Charge**: the top below `charge_start_c` starts a charge, held until the bottom reaches
  `charge_stop_c` (the whole store hot, not just its top). While charging, the store calls its
  heat main for heat (heat_main.py fires the sources) and its charge pump runs while a source
  runs or starts (not while the lead rests after its minimum off time: it would only stir the
  main's cooler water through the store).
- **Discharge**: the main's zones calling while the store's top is at or above
  `discharge_min_c` (and it is not charging): the store serves them, its discharge pump runs and
  the main's sources stand by.
- **Solar thermal** feeds the store through a solar circuit whose tank sensor is the store's
  bottom sensor (solar_circuit.py switches its pump). While a solar pump is confirmed running
  the sources do not charge the store ("after-heating suppression", as RESOL's controllers do
  it): free heat first. A charge the sources had begun ends; the store still serves the main
  when hot enough, and the zones' own demand still fires the sources, so no room waits for the
  sun. When the solar pump stops with the top still below `charge_start_c`, the sources charge.
- **A lost sensor** (top or bottom): no charge and no discharge (the sources serve the main
  directly) and an alarm.

Remembered: `store:<id>:charging`, the charge latch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from control.engine.specs import THERMAL_STORE, Decision, ThermalStoreSpec
from control.engine.strategies import sensor_health
from control.engine.tick import Tick


@dataclass(frozen=True)
class StorePlan:
    """What the store asks of its heat main this tick."""

    store: ThermalStoreSpec
    charging: str = ""  # the reason it calls for heat ("" = not charging)
    can_serve: str = ""  # the reason it may serve the main's demand ("" = it may not)
    solar: str = ""  # why the sources do not charge it: solar is ("" = no solar pump running)


def plan(tick: Tick, store: ThermalStoreSpec) -> StorePlan:
    key = f"store:{store.id}:charging"
    problems = [
        p
        for reading, name in ((store.top, store.top_name), (store.bottom, store.bottom_name))
        if (p := sensor_health.problem(
            reading, bool(name), tick.now_s, store.sensor_stale_after_s, name, tick.tz
        ))
    ]  # fmt: skip
    if problems:
        tick.alarms[f"store-sensor:{store.id}"] = (
            f"Thermal store '{store.name}': {'; '.join(problems)}. No charge and no discharge: "
            "the heat main's sources serve it directly"
        )
        return StorePlan(store)
    top, bottom = store.top.value, store.bottom.value  # type: ignore[union-attr]
    charging = bool(tick.remembered.get(key))
    if charging and bottom >= store.charge_stop_c:
        charging = False
    elif not charging and top < store.charge_start_c:
        charging = True
    solar = _solar_charging(tick, store)
    if solar and charging:
        # The sun charges it: the sources' charge waits (ends; a new one starts after the sun if
        # the top is still low).
        solar = f"{solar}, top {top:.1f} °C: the sources do not charge it"
        charging = False
    elif solar:
        solar = f"{solar}, top {top:.1f} °C"
    if charging:
        tick.memory[key] = True
        return StorePlan(
            store,
            charging=(
                f"Store '{store.name}' charging: top {top:.1f} °C (starts below "
                f"{store.charge_start_c:g} °C), until the bottom reaches {store.charge_stop_c:g} °C "
                f"(now {bottom:.1f} °C)"
            ),
        )
    if top >= store.discharge_min_c:
        return StorePlan(
            store,
            can_serve=(
                f"Store '{store.name}' serves the main: top {top:.1f} °C ≥ "
                f"{store.discharge_min_c:g} °C"
            ),
            solar=solar,
        )
    return StorePlan(store, solar=solar)


def _solar_charging(tick: Tick, store: ThermalStoreSpec) -> str:
    """Which solar circuit is charging the store ("" if none): its pump confirmed running (the
    plant's word, not our command: a pump that never started heats nothing)."""
    for circuit in tick.snapshot.solars:
        if circuit.id not in store.solar_ids:
            continue
        pump = tick.snapshot.actuators.get(circuit.pump_id)
        if pump is None or not pump.confirmed_open:
            continue
        hot = circuit.collector
        collector = f" (collector {hot.value:.1f} °C)" if hot is not None else ""
        return f"Store '{store.name}': solar circuit '{circuit.name}' is charging it{collector}"
    return ""


def drive_pumps(
    tick: Tick, plan: StorePlan, serving: bool, decisions: dict[int, Decision], heating: str
) -> None:
    """The charge pump runs while charging and a source of the main runs or starts (`heating`
    says which; "" if none): without one it would only stir the main's cooler water through the
    store (the lead resting after its minimum off time, every source lost). The discharge pump
    runs while the store serves."""
    s = plan.store
    owner = f"thermal store '{s.name}'"
    idle = "Store neither charging nor serving"
    charge_why = plan.charging or plan.solar or idle
    if plan.charging:
        charge_why += f"; heat from {heating}" if heating else "; pump waits: no source running"
    for pump_id, on, why in (
        (s.charge_pump_id, bool(plan.charging and heating), charge_why),
        (s.discharge_pump_id, serving, plan.can_serve if serving else idle),
    ):
        act = tick.snapshot.actuators.get(pump_id) if pump_id else None
        if act is None:
            continue
        proposal = Decision(act.id, on, why, THERMAL_STORE)
        decisions[act.id] = replace(tick.finalize(act, proposal), owner=owner)
