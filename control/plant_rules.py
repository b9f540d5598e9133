"""The rules for a heating plant's members, shared by its model clean(), the admin form and the
API serializer (one place, so the admin and the API refuse the same things).

The members (zones) are a many-to-many field: the model's own clean() can only see the ones
already saved, so an index zone picked in the same save as the zone it names was refused, and an
API create could not be checked at all. The admin form and the serializer hand clean() the zones
being saved (`member_zone_ids` on the unsaved instance).
"""

from __future__ import annotations

from collections.abc import Iterable


def index_zone_problem(index_zone_id: int | None, zone_ids: Iterable[int] | None) -> str:
    """Why the index zone cannot be the plant's index circuit ("" if it can)."""
    if index_zone_id is None or zone_ids is None:
        return ""
    if index_zone_id not in set(zone_ids):
        return "The index zone must be one of the plant's zones."
    return ""


def member_zone_ids(plant) -> set[int] | None:
    """The zones being saved with the plant (set by the form or serializer), else the saved
    ones, else None (a new plant checked without its members)."""
    pending = getattr(plant, "member_zone_ids", None)
    if pending is not None:
        return set(pending)
    if plant.pk is None:
        return None
    return set(plant.zones.values_list("pk", flat=True))
