"""BACnet binary (and multi-state) outputs: write our priority of the point's priority array, read it back,
confirm; relinquish (NULL at our priority) when released, so the controller's own logic has
the point again.

A multi-state output or value (an old controller's pump command Off/On/Auto) is switched as
a binary one: ON and OFF are the state numbers its actuator names (point_value).

Confirmed means the controller reads back the state we wrote *and* our priority is the one in
force. A higher priority holding the point (a hand switch at 1, a life-safety override) is a
fault named in the controller's terms: the relay is not ours to switch until it lets go.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings

from control.drivers.modbus import CoilResult
from control.engine.specs import IDLE_STATE, Decision
from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import (
    COMMANDABLE_MULTI_STATE,
    BacnetError,
    CommandState,
    PointCommand,
    Value,
    same,
)
from sensors.models import Actuator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputTarget:
    actuator_id: int  # the caller's key: an actuator id, or a plant id for its analogue output
    address: str
    ref: str  # 'binary-output,1', 'analog-output,3'
    priority: int
    timeout_s: float
    state: Value | None  # ON/OFF, or an analogue value; None: relinquish
    write: bool = True  # False: read back only (and rewrite if our slot lost it)


def point_value(actuator: Actuator, state: bool | None) -> Value | None:
    """What is written for ON/OFF: the state itself, or for a multi-state point the state
    number the actuator names for it. None (relinquish) stays None."""
    if state is None or actuator.bacnet_on_state is None:
        return state
    return actuator.bacnet_on_state if state else actuator.bacnet_off_state


def target_for(actuator: Actuator, state: bool | None, write: bool = True) -> OutputTarget:
    device = actuator.bacnet_device
    if device is None:
        raise ValueError(f"actuator '{actuator.name}' has no BACnet controller")
    return OutputTarget(
        actuator.pk,
        device.address,
        actuator.bacnet_object,
        actuator.bacnet_priority,
        device.timeout_s,
        point_value(actuator, state),
        write,
    )


def where(actuator: Actuator) -> str:
    """The output in an engineer's words, for alarms: 'BACnet controller boiler-house
    (127.0.0.2:47808) binary-output,1 at priority 8'."""
    device = actuator.bacnet_device
    name = f"BACnet controller {device.node.name} ({device.address})" if device else "no controller"
    return f"{name} {actuator.bacnet_object} at priority {actuator.bacnet_priority}"


def local_address() -> str:
    return f"{settings.BMS_BACNET_ADDRESS}:0"


def client_instance() -> int:
    return int(settings.BMS_BACNET_INSTANCE)


def held_key(actuator_id: int) -> str:
    return f"bacnet-priority:{actuator_id}"


def held_words(actuator: Actuator, read: CommandState) -> str:
    """The `bacnet-priority:` alarm's message when a priority above ours holds the point ('' when
    none does): the controller, its device, the object and the value it holds, so whoever
    looks knows which panel switch or override to find."""
    if read.priority is None or read.priority >= actuator.bacnet_priority:
        return ""
    device = actuator.bacnet_device
    controller = (
        f"BACnet controller {device.node.name} (device {device.device_instance} at "
        f"{device.address})"
        if device
        else "A BACnet controller"
    )
    return (
        f"{controller}: {actuator.bacnet_object} (actuator '{actuator.name}') is held at "
        f"{words(read.value)} by priority {read.priority}, above our priority "
        f"{actuator.bacnet_priority}: it is not ours to command until that priority is released "
        "(a hand switch at the controller, or a life-safety override)."
    )


def words(state: Value | None) -> str:
    if state is None:
        return "released"
    if isinstance(state, bool):
        return "ON" if state else "OFF"
    # An int is a multi-state point's state number (an analogue value is always a float).
    return f"{state:g}" if isinstance(state, float) else f"state {state}"


def judge(target: OutputTarget, read: CommandState) -> str:
    """'' when the read-back confirms the write, else what is wrong, in plain words."""
    if target.state is None:
        if read.ours is not None:
            return f"priority {target.priority} still holds {words(read.ours)} after relinquishing"
        return ""
    if read.priority is not None and read.priority < target.priority:
        return (
            f"priority {read.priority} holds {target.ref} at {words(read.value)}: our write at "
            f"priority {target.priority} is not in force until it is released"
        )
    if read.priority != target.priority or not same(read.value, target.state):
        return f"read back {words(read.value)} after writing {words(target.state)}"
    return ""


def apply_one(target: OutputTarget) -> tuple[CoilResult, CommandState | None]:
    """Write (or relinquish), read back, judge. Never raises for the controller's faults."""
    if target.ref.split(",", 1)[0] in COMMANDABLE_MULTI_STATE:
        # By hand (`bacnet_output`) as the tick serves it: a state number, not ON/OFF.
        point = apply([target], deadline_s=target.timeout_s * 4, timeout_s=target.timeout_s)
        return point[target.actuator_id], point[target.actuator_id].read
    result = CoilResult(target.actuator_id)
    try:
        read = bacnet_client.command_binary(
            target.address,
            target.ref,
            target.state,
            priority=target.priority,
            local=local_address(),
            client_instance=client_instance(),
            timeout_s=target.timeout_s,
        )
    except (BacnetError, ValueError) as exc:
        result.error = f"BACnet controller {target.address}, {target.ref}: {exc}"
        log.warning("%s", result.error)
        return result, None
    result.written = True
    result.sent_at = time.time()
    result.actual = read.value
    result.error = judge(target, read)
    result.confirmed = not result.error
    result.confirmed_at = time.time() if result.confirmed else None
    return result, read


# --- the control tick ------------------------------------------------------------------------


def hands_back(actuator: Actuator, decision: Decision) -> bool:
    """Nothing drives this BACnet output (its zone released it, it was never assigned): our
    slot is relinquished so the controller's own logic has the point, instead of our holding
    it at an idle state. An override or a minimum run time still holds it (their strategies
    are not IDLE_STATE)."""
    return actuator.driver == Actuator.Driver.BACNET and decision.strategy == IDLE_STATE


def release_reason(actuator: Actuator, decision: Decision) -> str:
    source = (
        f"Released from {decision.released_from}" if decision.released_from else "Not controlled"
    )
    return (
        f"{source}: NULL at priority {actuator.bacnet_priority}, so the controller's own logic "
        f"has {actuator.bacnet_object} again"
    )


@dataclass
class PointResult(CoilResult):
    """A BACnet output's result as the runner reads a relay's (control/drivers/modbus.py), with
    what the controller read back."""

    read: CommandState | None = None
    found: Value | None = None  # what our slot held when it had to be corrected
    priority: int = 8


def correction_words(target_priority: int, ref: str, found: Value | None, state: Value) -> str:
    return (
        f"Re-asserted: priority {target_priority} of {ref} held {'NULL' if found is None else words(found)}, "
        f"should be {words(state)} (the controller restarted, or another client wrote our slot?). "
    )


def apply(
    targets: list[OutputTarget], *, deadline_s: float, timeout_s: float
) -> dict[int, PointResult]:
    """Write, read back and judge every target: controllers side by side, each one's points in
    turn, each request bounded by the lower of the controller's timeout and `timeout_s`, the
    whole within `deadline_s` (sensors/devices/bacnet_client.py command_points). Never raises
    for the network: a controller that does not answer is each of its points' fault."""
    results = {t.actuator_id: PointResult(t.actuator_id, priority=t.priority) for t in targets}
    if not targets:
        return results
    commands = [
        PointCommand(
            t.actuator_id, t.address, t.ref, t.priority, t.state, t.write,
            min(t.timeout_s, timeout_s),
        )
        for t in targets
    ]  # fmt: skip
    try:
        outcomes = bacnet_client.command_points(
            commands,
            local=local_address(),
            client_instance=client_instance(),
            deadline_s=deadline_s,
            now=time.time,
        )
    except (BacnetError, ValueError) as exc:
        for t in targets:
            results[t.actuator_id].error = f"BACnet controller {t.address}, {t.ref}: {exc}"
        log.warning("BACnet outputs not served: %s", exc)
        return results
    for t in targets:
        outcome, result = outcomes[t.actuator_id], results[t.actuator_id]
        result.written = outcome.written_at is not None
        result.sent_at = outcome.written_at
        result.corrected = outcome.corrected and not t.write
        result.found = outcome.found
        result.read = outcome.read
        if outcome.read is None:
            result.error = f"BACnet controller {t.address}, {t.ref}: {outcome.error}"
            log.warning("%s", result.error)
            continue
        result.actual = outcome.read.value
        result.error = judge(t, outcome.read)
        result.confirmed = not result.error
        result.confirmed_at = time.time() if result.confirmed else None
    return results


def release(actuator: Actuator) -> tuple[CoilResult, CommandState | None]:
    """Relinquish our priority: the controller's own value returns."""
    return apply_one(target_for(actuator, None))
