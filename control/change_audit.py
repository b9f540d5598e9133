"""The change history of the plant (control.models.ProgrammeChange), one way for every door:
the staff pages, the REST API and the admin each record who, when, what and why, with each
change as "label old → new" in the staff pages' words (control/plant_words.py).

`snapshot` reads an object's fields in words, `changes` compares two snapshots; `whole`
reads a heating plant with its weather compensation, or a heat main with its heat sources and
thermal store, as one flat snapshot so an admin save of the plant and its inline is one entry.
Audited: heating plants, weather compensation, solar circuits, heat mains, heat sources,
thermal stores (API_AUDITED); of a zone, whether it accepts BACnet writes (`record_zone_bacnet`:
a door to the plant from an unauthenticated network, so who opened it is kept); of a feed,
whether the site's BACnet device shows it (`record_feed_bacnet`, from the staff BACnet page).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models
from django.utils.text import capfirst

from control.models import (
    HeatingPlant,
    HeatMain,
    HeatSource,
    ProgrammeChange,
    SolarCircuit,
    ThermalStore,
    WeatherCompensation,
    Zone,
)
from control.plant_words import PLANT_WORDS, SOLAR_WORDS, WEATHER_WORDS, weather_words_for
from feeds import save_audit
from feeds.models import Feed
from sensors.models import Actuator, Sensor

API_REASON = "changed through the API"
ADMIN_REASON = "changed in the admin"
IN_PLACE = "in place"  # a part's own line in a snapshot
REASON_MAX = ProgrammeChange._meta.get_field("reason").max_length

# The page's words first; fields no page shows (a plant's site) by their verbose names.
_PAGE_WORDS: dict[type[models.Model], dict[str, str]] = {
    HeatingPlant: PLANT_WORDS,
    WeatherCompensation: WEATHER_WORDS,
    SolarCircuit: SOLAR_WORDS,
}
# The owner a part is audited under (its own subject would be lost among the plant's).
_OWNER = {WeatherCompensation: "plant", HeatSource: "heat_main", ThermalStore: "heat_main"}


def audit(by: AbstractBaseUser, subject: str, change: str, reason: str) -> ProgrammeChange:
    return ProgrammeChange.objects.create(
        by=by.get_username(), subject=subject[:200], change=change, reason=reason[:REASON_MAX]
    )


def thing_words(obj: Any) -> str:
    """A relay or sensor as a person picks it: "Boiler (boiler)", "Outside (t1 on node 'Roof')"."""
    if isinstance(obj, Actuator):
        return f"{obj.name} ({obj.get_kind_display().lower()})"
    if isinstance(obj, Sensor):
        where = f"{obj.key} on node '{obj.node.name}'"
        return f"{obj.name} ({where})" if obj.name else where
    return str(obj)


def snapshot(instance: Any, words: dict[str, str]) -> dict[str, str]:
    """Each field's stored value in words: a relay or sensor by name, a choice by its label,
    yes/no, a number as typed; the rooms by name."""
    said = {}
    for name in words:
        field = instance._meta.get_field(name)
        if field.many_to_many:
            rows = getattr(instance, name).all() if instance.pk is not None else []
            said[name] = ", ".join(thing_words(o) for o in rows)
            continue
        value = getattr(instance, name)
        if value is None or value == "":
            said[name] = ""
        elif field.is_relation:
            said[name] = thing_words(value)
        elif field.choices:
            said[name] = str(dict(field.choices).get(value, value))
        elif isinstance(value, bool):
            said[name] = "yes" if value else "no"
        elif isinstance(value, float):
            said[name] = f"{value:g}"
        else:
            said[name] = str(value)
    return said


def changes(before: dict[str, str], after: dict[str, str], words: dict[str, str]) -> list[str]:
    """'Label old → new' for each field whose value changed."""
    return [
        f"{label} {before.get(name) or '—'} → {after.get(name) or '—'}"
        for name, label in words.items()
        if (before.get(name) or "") != (after.get(name) or "")
    ]


def words_of(model: type[models.Model]) -> dict[str, str]:
    """Each audited field of the model and its label."""
    words = dict(_PAGE_WORDS.get(model, {}))
    owner = _OWNER.get(model)
    for field in model._meta.get_fields():
        editable = getattr(field, "editable", False) and not field.auto_created
        if editable and field.concrete and field.name not in words and field.name != owner:
            words[field.name] = capfirst(str(field.verbose_name))
    return words


def words_for(instance: models.Model) -> dict[str, str]:
    """words_of its model, less a weather compensation's fields its mode and output do not use."""
    words = words_of(type(instance))
    if isinstance(instance, WeatherCompensation):
        used = weather_words_for(instance.mode, instance.output)
        words = {name: label for name, label in words.items() if name in used}
    return words


def subject_of(instance: models.Model) -> str:
    """What the change is filed under: the plant, circuit or heat main it belongs to."""
    owner = _OWNER.get(type(instance))
    if owner is not None:
        return subject_of(getattr(instance, owner))
    kind = {HeatingPlant: "heating plant", SolarCircuit: "solar circuit", HeatMain: "heat main"}
    return f"{kind[type(instance)]} '{instance.name}'"


def part_prefix(instance: models.Model) -> str:
    """How a part names itself inside its owner's entry: "weather compensation: "."""
    if isinstance(instance, WeatherCompensation):
        return "weather compensation: "
    if isinstance(instance, HeatSource | ThermalStore):
        return f"{instance._meta.verbose_name} '{instance.name}': "
    return ""


def described(instance: models.Model) -> dict[str, str]:
    """The object's fields in words, keyed by their label (prefixed when it is a part)."""
    words = words_for(instance)
    prefix = part_prefix(instance)
    said = {prefix + words[name]: value for name, value in snapshot(instance, words).items()}
    if prefix:  # the part itself, so its removal in the admin is said
        said[prefix.removesuffix(": ")] = IN_PLACE
    return said


def _parts(root: models.Model) -> list[models.Model]:
    if isinstance(root, HeatingPlant):
        return list(WeatherCompensation.objects.filter(plant=root))
    if isinstance(root, HeatMain):
        return [
            *HeatSource.objects.filter(heat_main=root),
            *ThermalStore.objects.filter(heat_main=root),
        ]
    return []


def whole(root: models.Model) -> dict[str, str]:
    """A plant or heat main with its parts, as stored now (read afresh from the database)."""
    fresh = type(root).objects.get(pk=root.pk)
    said = described(fresh)
    for part in _parts(fresh):
        said.update(described(part))
    return said


def diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """'Label old → new' for two flat snapshots keyed by label. Only what the object now has
    is compared (a field the new mode does not use is no change); a part taken away is said
    once ("weather compensation in place → —"), not field by field."""
    gone = [k for k, v in before.items() if k not in after and v == IN_PLACE]
    keys = [*after, *gone]
    return changes(before, after, {k: k for k in keys})


def record(
    by: AbstractBaseUser,
    instance: models.Model,
    before: dict[str, str] | None,
    after: dict[str, str] | None,
    reason: str,
) -> ProgrammeChange:
    """Audit a create (before None), an update, or a delete (after None)."""
    prefix = part_prefix(instance)
    if after is None:
        change = f"{prefix}deleted"
    elif before is None:  # every field from '—', the parts' own lines left out
        change = f"{prefix}added: " if prefix else "created: "
        change += "; ".join(diff({}, {k: v for k, v in after.items() if v != IN_PLACE}))
    else:
        change = "; ".join(diff(before, after)) or "no change"
    return audit(by, subject_of(instance), change, reason)


# A zone's BACnet write switches (docs/BACNET.md section 7), in the staff pages' words.
ZONE_BACNET_WORDS = {
    "bacnet_setpoint_writable": "BACnet setpoint writes accepted",
    "bacnet_occupancy_writable": "BACnet occupancy writes accepted",
}


def zone_bacnet(zone: Zone | None) -> dict[str, str]:
    """The zone's BACnet write switches in words; a zone not yet saved has them off."""
    if zone is None or zone.pk is None:
        return dict.fromkeys(ZONE_BACNET_WORDS, "no")
    return snapshot(Zone.objects.get(pk=zone.pk), ZONE_BACNET_WORDS)


def record_zone_bacnet(
    by: AbstractBaseUser, zone: Zone, before: dict[str, str], reason: str
) -> ProgrammeChange | None:
    """Audit a change of the zone's BACnet write switches (before: `zone_bacnet` of it before
    the save); nothing when they did not change."""
    return _record_switches(by, f"zone '{zone.name}'", before, zone_bacnet(zone),
                            ZONE_BACNET_WORDS, reason)  # fmt: skip


# A feed shown on the site's BACnet device (docs/BACNET.md section 7): what the plant LAN sees.
FEED_BACNET_WORDS = {"bacnet_export": "Shown on BACnet"}


def feed_bacnet(feed: Feed) -> dict[str, str]:
    """Whether the feed is shown on BACnet, in words, as stored."""
    return snapshot(Feed.objects.get(pk=feed.pk), FEED_BACNET_WORDS)


def record_feed_bacnet(
    by: AbstractBaseUser, feed: Feed, before: dict[str, str], reason: str
) -> ProgrammeChange | None:
    """Audit a feed shown on BACnet or taken off it (before: `feed_bacnet` of it before the
    save); nothing when it did not change."""
    return _record_switches(by, f"feed '{feed}'", before, feed_bacnet(feed),
                            FEED_BACNET_WORDS, reason)  # fmt: skip


def feed_bacnet_auditor(
    before: Feed | None,
) -> Callable[[AbstractBaseUser, Feed, str], ProgrammeChange | None]:
    """The feed API's and admin's auditor (registered in control/apps.py): a feed shown on
    BACnet or taken off it, kept as from the staff page, with the door's reason."""
    said = feed_bacnet(before) if before is not None else dict.fromkeys(FEED_BACNET_WORDS, "no")

    def finish(by: AbstractBaseUser, feed: Feed, door: str) -> ProgrammeChange | None:
        reason = ADMIN_REASON if door == save_audit.ADMIN else API_REASON
        return record_feed_bacnet(by, feed, said, reason)

    return finish


def _record_switches(
    by: AbstractBaseUser,
    subject: str,
    before: dict[str, str],
    after: dict[str, str],
    words: dict[str, str],
    reason: str,
) -> ProgrammeChange | None:
    said = changes(before, after, words)
    if not said:
        return None
    return audit(by, subject, "; ".join(said), reason)
