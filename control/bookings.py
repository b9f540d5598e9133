"""The one write path of a room booking, whether made on the staff booking page, through the
API or in the admin (issue #24: each of the three stamped who and when itself). An iCal feed's
bookings are its sync's (control/ical.py): nobody made them here.

Each function checks the booking rules (Booking.full_clean: clashes, length, setpoint, the
same messages everywhere; a ValidationError leaves nothing saved), stamps who and when, and
saves, inside one transaction so the clash check and the save see the same bookings. The row is
the audit trail: who booked it and from where (`booked_by`, `source`), who last moved it and
when (`changed_by`, `changed_at`), who cancelled it and when (kept, never deleted).
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from control.models import Booking


def book(booking: Booking, by: AbstractBaseUser, source: Booking.Source) -> Booking:
    """Save a new booking made by `by` through `source` (staff page, API or admin)."""
    # A username may be longer than the field (150 against 100): the head of it, not a refusal.
    booking.booked_by = by.get_username()[: Booking._meta.get_field("booked_by").max_length]
    booking.source = source
    return _checked_save(booking)


def move(booking: Booking, by: AbstractBaseUser, *, now: datetime | None = None) -> Booking:
    """Save a change to a booking (its time, title or setpoint), stamped with who changed it
    and when: bookers may move anyone's booking, so a change leaves a trace (issue #16)."""
    booking.changed_by = by.get_username()
    booking.changed_at = now or timezone.now()
    return _checked_save(booking)


def cancel(booking: Booking, by: AbstractBaseUser) -> None:
    """Cancel: kept, marked who and when, so an iCal sync keeps it cancelled."""
    booking.cancel(by=by.get_username())


def _checked_save(booking: Booking) -> Booking:
    with transaction.atomic():
        booking.full_clean()
        booking.save()
    return booking


def restore(booking: Booking, by: AbstractBaseUser, *, now: datetime | None = None) -> Booking:
    """Undo a cancel: the booking is in force again, stamped as changed by `by`, unless the room
    was booked for that time meanwhile (a ValidationError naming the clash, nothing saved)."""
    booking.cancelled, booking.cancelled_at, booking.cancelled_by = False, None, ""
    return move(booking, by, now=now)
