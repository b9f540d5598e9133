"""BACnet binary outputs: write our priority of the point's priority array, read it back,
confirm; relinquish (NULL at our priority) when released, so the controller's own logic has
the point again.

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
from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import BacnetError, CommandState
from sensors.models import Actuator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputTarget:
    actuator_id: int
    address: str
    ref: str  # 'binary-output,1'
    priority: int
    timeout_s: float
    state: bool | None  # None: relinquish


def target_for(actuator: Actuator, state: bool | None) -> OutputTarget:
    device = actuator.bacnet_device
    if device is None:
        raise ValueError(f"actuator '{actuator.name}' has no BACnet controller")
    return OutputTarget(
        actuator.pk,
        device.address,
        actuator.bacnet_object,
        actuator.bacnet_priority,
        device.timeout_s,
        state,
    )


def local_address() -> str:
    return f"{settings.BMS_BACNET_ADDRESS}:0"


def client_instance() -> int:
    return int(settings.BMS_BACNET_INSTANCE)


def words(state: bool | None) -> str:
    return "released" if state is None else ("ON" if state else "OFF")


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
    if read.priority != target.priority or read.value != target.state:
        return f"read back {words(read.value)} after writing {words(target.state)}"
    return ""


def apply_one(target: OutputTarget) -> tuple[CoilResult, CommandState | None]:
    """Write (or relinquish), read back, judge. Never raises for the controller's faults."""
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


def apply(targets: list[OutputTarget]) -> dict[int, CoilResult]:
    """One result per actuator, the targets served in turn (each bounded by its deadline)."""
    return {t.actuator_id: apply_one(t)[0] for t in targets}


def release(actuator: Actuator) -> tuple[CoilResult, CommandState | None]:
    """Relinquish our priority: the controller's own value returns."""
    return apply_one(target_for(actuator, None))
