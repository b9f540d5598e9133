"""The one write path of an operator's hold on plant: a relay override (Override) and an
analogue output override (OutputOverride), whether made on the staff page, through the API or
in the admin (issue #24: each of the three stamped who and when itself).

Each function checks the model's own rules (`full_clean`: the same messages everywhere; a
ValidationError leaves nothing saved), stamps who and when, and saves. The row is the audit
trail: who made it (`created_by`), when it starts, and a cancellation that keeps it
(HeldUntil.cancel: who and when). How a refusal is shown is the caller's: messages on the
page, a 400 from the API, the admin form's errors (it runs the same rules first).
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from control.models import HeldUntil, OutputOverride

Hold = TypeVar("Hold", bound=HeldUntil)


def place(hold: Hold, by: AbstractBaseUser | None, *, now: datetime | None = None) -> Hold:
    """Save a new hold made by `by` (None: made by no person, a BACnet write whose reason
    names its sender). An output override starts when it is made (`now`), so its length is
    counted from then; a relay override keeps the start it was given."""
    hold.created_by = by
    if isinstance(hold, OutputOverride):
        hold.starts = now or timezone.now()
    return _checked_save(hold)


def change(hold: Hold) -> Hold:
    """Save a change to a hold (the API's PUT/PATCH, the admin's change form) under the same
    rules as a new one."""
    return _checked_save(hold)


def cancel(hold: HeldUntil, by: AbstractBaseUser) -> None:
    """End a hold now: kept, marked cancelled with who and when (never deleted)."""
    hold.cancel(by=by.get_username())


def _checked_save(hold: Hold) -> Hold:
    with transaction.atomic():
        hold.full_clean()
        hold.save()
    return hold
