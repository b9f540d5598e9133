"""Booking-driven heating: each booking is an occupancy window at its own setpoint."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from control.engine.specs import BOOKING, BookingSpec, Window
from control.engine.timefmt import hhmm


def windows(
    bookings: tuple[BookingSpec, ...],
    start: datetime,
    end: datetime,
    tz: ZoneInfo,
    comfort: float,
) -> list[Window]:
    found = [
        Window(
            b.start,
            b.end,
            b.setpoint if b.setpoint is not None else comfort,
            f"Booking '{b.title}' {hhmm(b.start, tz)}–{hhmm(b.end, tz)}",
            BOOKING,
        )
        for b in bookings
        if b.end > start and b.start < end and b.end > b.start
    ]
    return sorted(found, key=lambda w: w.start)
