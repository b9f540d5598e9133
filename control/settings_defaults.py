"""Control settings with their defaults (override any of them in Django settings)."""

from __future__ import annotations

from django.conf import settings


def tick_s() -> int:
    return int(getattr(settings, "BMS_CONTROL_TICK", 30))


def tick_lock_lease_s() -> int:
    """The tick lock's lease (bms/settings.py BMS_CONTROL_LOCK_LEASE_S)."""
    default = max(2, min(10, tick_s()))
    return max(2, int(getattr(settings, "BMS_CONTROL_LOCK_LEASE_S", default)))


def keepalive_s() -> int:
    """Re-write every actuator's state this often, so a relay that rebooted is corrected
    even between read-back checks (and node queues get their state again)."""
    return int(getattr(settings, "BMS_CONTROL_KEEPALIVE", 600))


def device_timeout_s() -> float:
    """One Modbus request waits at most this long."""
    return float(getattr(settings, "BMS_CONTROL_DEVICE_TIMEOUT", 1.0))


def device_deadline_s() -> float:
    """All the work on one relay board in one tick, retries included, ends by this."""
    return float(getattr(settings, "BMS_CONTROL_DEVICE_DEADLINE", 3.0))


def device_attempts() -> int:
    return int(getattr(settings, "BMS_CONTROL_DEVICE_ATTEMPTS", 3))


def node_ack_timeout_s() -> int:
    """A queued node command not acknowledged within this raises an alarm."""
    return int(getattr(settings, "BMS_CONTROL_NODE_ACK_TIMEOUT", 300))


def fallback_duty_pct() -> float:
    """A zone whose sensor is lost, while occupied, heats this share of each fallback period
    (bounded 0–100 %)."""
    return min(100.0, max(0.0, float(getattr(settings, "BMS_CONTROL_FALLBACK_DUTY", 50.0))))


def fallback_period_s() -> int:
    """The fallback duty cycle's period (bounded 2–120 min: shorter would short-cycle the
    valve, longer leaves the room cold for hours at low duty)."""
    return min(7200, max(120, int(getattr(settings, "BMS_CONTROL_FALLBACK_PERIOD", 1200))))


def limit_band_k() -> float:
    """Switching band of the limits that have none of their own (zone over-temperature, plant
    frost from the outside temperature): a limit trips at its value and releases only this far
    past it (bounded 0.1–10 K)."""
    return min(10.0, max(0.1, float(getattr(settings, "BMS_CONTROL_LIMIT_BAND", 1.0))))
