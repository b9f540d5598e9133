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
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from control import holds
from control.models import Override, Zone
from core.log_budget import BudgetedLines

log = logging.getLogger(__name__)
# Refusals a minute, for each kind of refusal: a sender (or many forged ones) writing without
# end cannot fill the disk through the log. Accepted writes are each an Override row anyway.
refusal_lines = BudgetedLines(log)

Kind = Literal["setpoint", "occupancy"]
# How the reason of an override made by a BACnet write starts (`_reason`), and what each kind
# holds after the writer's address: how an earlier one of the same kind is found to replace.
REASON_PREFIX = "BACnet write from "
KIND_REASONS: dict[str, tuple[str, ...]] = {
    "setpoint": (": setpoint ",),
    "occupancy": (": occupied", ": unoccupied"),
}
# The Override's own bounds on a held setpoint (its field's validators), past the zone's.
OVERRIDE_MIN, OVERRIDE_MAX = 5.0, 30.0


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
    if not zone.enabled:
        raise _refused(
            write, "property", "writeAccessDenied",
            f"zone '{zone}' is disabled: no control works to an override there",
        )  # fmt: skip
    enabled = (
        zone.bacnet_setpoint_writable
        if write.kind == "setpoint"
        else zone.bacnet_occupancy_writable
    )
    if not enabled:
        raise _refused(
            write, "property", "writeAccessDenied",
            f"{write.kind} writes not enabled on zone '{zone}'",
        )  # fmt: skip
    if write.kind == "setpoint" and (why := _outside_limits(write.value, zone)):
        raise _refused(write, "property", "valueOutOfRange", why)
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
        with transaction.atomic():
            holds.place(override, None)
            replaced = _end_earlier(write, zone, override, now)
    except ValidationError as exc:
        raise _refused(write, "property", "valueOutOfRange", "; ".join(exc.messages)) from exc
    ended = f", replacing override {', '.join(map(str, replaced))}" if replaced else ""
    log.warning(
        "BACnet write from %s accepted: zone '%s' %s %g, override %d until %s%s",
        write.source, zone, write.kind, write.value, override.pk, override.expires.isoformat(),
        ended,
    )  # fmt: skip
    return override


def _outside_limits(value: float, zone: Zone) -> str | None:
    """Why a setpoint is not one the zone can be held at, in the zone's own limits (from its
    frost-off to below its cut-off, within an override's 5-30 °C); None when it is."""
    low = max(zone.frost_off, OVERRIDE_MIN)
    if math.isfinite(value) and low <= value < zone.max_temperature and value <= OVERRIDE_MAX:
        return None
    high = (
        f"below its cut-off {zone.max_temperature:g} °C"
        if zone.max_temperature <= OVERRIDE_MAX
        else f"{OVERRIDE_MAX:g} °C (an override's most)"
    )
    return (
        f"setpoint {value:g} °C is outside the limits of zone '{zone}': from {low:g} °C to {high}"
    )


def made_by_write(override: Override, kind: str) -> bool:
    """Whether `override` was made by a BACnet write of `kind`: by no person, its reason as
    `_reason` writes it. One a person made (created_by set) never is."""
    reason = override.reason
    return (
        override.created_by_id is None
        and reason.startswith(REASON_PREFIX)
        and any(mark in reason for mark in KIND_REASONS[kind])
    )


def _end_earlier(write: NetworkWrite, zone: Zone, newer: Override, now: datetime) -> list[int]:
    """End the zone's overrides made by earlier BACnet writes of the same kind, still in force
    or yet to start: cancelled (kept, the audit trail) by the writer of the one replacing
    them. Returns their ids."""
    ended = []
    earlier = (
        Override.objects.not_over(now)
        .filter(zone=zone, created_by__isnull=True, reason__startswith=REASON_PREFIX)
        .exclude(pk=newer.pk)
    )
    for override in earlier:
        if made_by_write(override, write.kind):
            override.cancel(by=f"{REASON_PREFIX}{write.source}")
            ended.append(override.pk)
    return ended


def _reason(write: NetworkWrite, zone: Zone) -> str:
    if write.kind == "setpoint":
        what = f"setpoint {write.value:g} °C"
    else:
        what = "occupied" if write.value else "unoccupied"
    return f"BACnet write from {write.source[:100]}: {what}"


OBJECT_OF = {"setpoint": "analog-value", "occupancy": "binary-value"}


def _refused(write: NetworkWrite, error_class: str, error_code: str, why: str) -> WriteRefused:
    refusal_lines.warning(
        f"refused {error_code}",
        "BACnet write from %s refused: %s,%d present-value (zone %d %s %g): %s",
        write.source, OBJECT_OF[write.kind], write.zone_id, write.zone_id, write.kind,
        write.value, why,
    )  # fmt: skip
    return WriteRefused(error_class, error_code, why)
