"""Writes from the BACnet network to our zones (control/bacnet_server.py hands them over),
decided on the process's main thread, where the database is.

BACnet has no authentication: a write is a command to the plant from whoever can send a UDP
packet to the plant LAN. So a write is refused unless an engineer enabled that kind on that
zone (Zone.bacnet_setpoint_writable / bacnet_occupancy_writable), and an accepted one is never
a change of configuration: it becomes an Override of the zone with an expiry
(BMS_BACNET_WRITE_HOLD_MIN), whose reason names the writer's address. The Override row is the
audit trail (kept when cancelled, on the staff page and in the admin), with a log line for
every write, accepted or refused. Frost protection and the over-temperature cut-off still win
at the tick, and a setpoint outside the zone's own limits is refused (value-out-of-range).

    setpoint  (analog-value present-value)  → the zone held at that °C
    occupancy (binary-value present-value)  → active: held at its comfort setpoint;
                                              inactive: held at its setback (none: heating off)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from control import holds
from control.models import Override, Zone

log = logging.getLogger(__name__)

Kind = Literal["setpoint", "occupancy"]


@dataclass(frozen=True)
class NetworkWrite:
    """A write as the BACnet thread decoded it: plain values, no Django."""

    kind: Kind
    zone_id: int
    value: float  # °C for a setpoint; 1.0 active / 0.0 inactive for occupancy
    source: str  # the writer, as bacnet_server.name_of names it (the real origin included)


class WriteRefused(Exception):
    """A write not applied, with the BACnet error class and code its sender is answered."""

    def __init__(self, error_class: str, error_code: str, why: str) -> None:
        super().__init__(why)
        self.error_class, self.error_code = error_class, error_code


def hold_for() -> timedelta:
    return timedelta(minutes=settings.BMS_BACNET_WRITE_HOLD_MIN)


def apply(write: NetworkWrite, *, now: datetime | None = None) -> Override:
    """Accept `write` as an Override of its zone, or raise WriteRefused (logged either way)."""
    now = now or timezone.now()
    zone = Zone.objects.filter(pk=write.zone_id).first()
    if zone is None:
        raise _refused(write, "object", "unknownObject", "no such zone")
    enabled = (
        zone.bacnet_setpoint_writable
        if write.kind == "setpoint"
        else zone.bacnet_occupancy_writable
    )
    if not enabled:
        raise _refused(
            write, "property", "writeAccessDenied", f"{write.kind} writes not enabled on '{zone}'"
        )
    override = Override(
        zone=zone, starts=now, expires=now + hold_for(), state=True, reason=_reason(write, zone)
    )
    if write.kind == "setpoint":
        override.setpoint = write.value
    elif write.value:
        override.setpoint = zone.comfort_setpoint
    elif zone.setback_setpoint is not None:
        override.setpoint = zone.setback_setpoint
    else:
        override.state = False  # unoccupied with no setback: heating off (frost still wins)
    try:
        holds.place(override, None)
    except ValidationError as exc:
        raise _refused(write, "property", "valueOutOfRange", "; ".join(exc.messages)) from exc
    log.warning(
        "BACnet write from %s accepted: zone '%s' %s %g, override %d until %s",
        write.source, zone, write.kind, write.value, override.pk, override.expires.isoformat(),
    )  # fmt: skip
    return override


def _reason(write: NetworkWrite, zone: Zone) -> str:
    if write.kind == "setpoint":
        what = f"setpoint {write.value:g} °C"
    else:
        what = "occupied" if write.value else "unoccupied"
    return f"BACnet write from {write.source[:100]}: {what}"


def _refused(write: NetworkWrite, error_class: str, error_code: str, why: str) -> WriteRefused:
    log.warning(
        "BACnet write from %s refused: zone %d %s %g (%s)",
        write.source, write.zone_id, write.kind, write.value, why,
    )  # fmt: skip
    return WriteRefused(error_class, error_code, why)
