"""Staff pages that program the site: weekly schedules (/staff/schedules/), the rooms each
schedule heats, by building of the metering tree (/staff/schedules/rooms/), and the site
calendars of closures and special days (/staff/calendars/, in staff/calendars.py).

Roles (core/roles.py): engineers change schedules and calendars; every other staff role sees
the same pages read-only. Every change is stored with who, when and why (ProgrammeChange).
Here, above control and energy, because a building is energy's and a zone control's.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from control.change_audit import audit
from control.models import (
    CalendarEntry,
    ProgrammeChange,
    Schedule,
    SchedulePeriod,
    SiteCalendar,
    Zone,
)
from core.pages import staff_page
from core.permissions import is_engineer
from energy.models import MeterNode
from staff.models import ZonePlace, zones_in
from staff.schedule_forms import (
    NEW_CALENDAR,
    WEEKDAYS,
    RoomsForm,
    ScheduleForm,
    empty_building,
)

RECENT_CHANGES = 30  # audit rows shown on a page (the admin lists them all)
ONLY_ENGINEERS = "Only engineers may change schedules and calendars."


def _period_text(p: SchedulePeriod) -> str:
    setpoint = f" {p.setpoint:g} °C" if p.setpoint is not None else ""
    return f"{p.start:%H:%M}–{p.end:%H:%M}{setpoint}"


def week_text(periods: list[SchedulePeriod]) -> str:
    """ "Mon–Fri 08:00–17:00 20 °C; Sat 10:00–13:00": days with the same periods run together."""
    by_day = [
        ", ".join(_period_text(p) for p in sorted(periods, key=lambda p: p.start) if p.weekday == d)
        for d in range(7)
    ]
    parts, day = [], 0
    while day < 7:
        last = day
        while last + 1 < 7 and by_day[last + 1] == by_day[day]:
            last += 1
        if by_day[day]:
            days = WEEKDAYS[day][:3] + (f"–{WEEKDAYS[last][:3]}" if last > day else "")
            parts.append(f"{days} {by_day[day]}")
        day = last + 1
    return "; ".join(parts) or "no periods (never occupied)"


@staff_page
def schedule_list(request: HttpRequest) -> HttpResponse:
    schedules = Schedule.objects.prefetch_related("periods", "zones", "calendars")
    rows = [
        {
            "schedule": s,
            "week": week_text(list(s.periods.all())),
            "zones": list(s.zones.all()),
            "calendars": list(s.calendars.all()),
        }
        for s in schedules
    ]
    return render(
        request,
        "staff/schedules.html",
        {
            "nav": "schedules",
            "rows": rows,
            "may_edit": is_engineer(request.user),
            "changes": ProgrammeChange.objects.all()[:RECENT_CHANGES],
        },
    )


@staff_page
def schedule_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    schedule = get_object_or_404(Schedule, pk=pk) if pk is not None else None
    may_edit = is_engineer(request.user)
    status = 200
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        form = ScheduleForm(request.POST, schedule=schedule)
        if form.is_valid():
            try:
                saved, change = _save(form, schedule, request.user)
            except ValidationError as exc:
                form.add_error(None, exc.messages)
            else:
                messages.success(
                    request,
                    f"Saved schedule '{saved.name}': the rooms follow it from the next tick.",
                )
                messages.info(request, change)
                return redirect("staff-schedule-edit", pk=saved.pk)
        status = 400
    else:
        if schedule is None and not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        form = ScheduleForm(schedule=schedule)
        if schedule is not None:
            form.initial = form.initial_from(schedule)
    if not may_edit:
        for field in form.fields.values():
            field.disabled = True
    changes = ProgrammeChange.objects.none()
    if schedule is not None:
        changes = ProgrammeChange.objects.filter(subject=_subject(schedule))[:RECENT_CHANGES]
    return render(
        request,
        "staff/schedule_edit.html",
        {
            "nav": "schedules",
            "schedule": schedule,
            "form": form,
            "week": form.week(),
            "may_edit": may_edit,
            "changes": changes,
        },
        status=status,
    )


def _subject(schedule: Schedule) -> str:
    return f"schedule '{schedule.name}'"


def _save(
    form: ScheduleForm, schedule: Schedule | None, by: AbstractBaseUser
) -> tuple[Schedule, str]:
    """Store the whole form in one transaction: the model rules (SchedulePeriod.clean's overlap
    check, CalendarEntry.clean) run on each row, and a refusal leaves nothing changed."""
    data = form.cleaned_data
    said: list[str] = []
    with transaction.atomic():
        if schedule is None:
            schedule = Schedule(name=data["name"])
            said.append("created")
        elif schedule.name != data["name"]:
            said.append(f"renamed from '{schedule.name}'")
        schedule.name = data["name"]
        schedule.full_clean()
        schedule.save()
        before = week_text(list(schedule.periods.all()))
        schedule.periods.all().delete()
        periods = form.new_periods(schedule)
        for p in periods:
            try:
                p.full_clean()
            except ValidationError as exc:
                raise ValidationError(
                    f"{WEEKDAYS[p.weekday]} {_period_text(p)}: {' '.join(exc.messages)}"
                ) from exc
            p.save()
        after = week_text(periods)
        if after != before:
            said.append(f"week: {after}")
        calendars = list(data["calendars"])
        if data.get("closure_first"):
            calendar = _closure_calendar(data["closure_calendar"], schedule)
            entry = CalendarEntry(
                calendar=calendar,
                first_day=data["closure_first"],
                last_day=data["closure_last"],
                description=data["closure_description"],
            )
            entry.full_clean()
            entry.save()
            said.append(f"closure {entry} added to calendar '{calendar.name}'")
            if calendar not in calendars:
                calendars.append(calendar)
        old_calendars = set(schedule.calendars.all())
        schedule.calendars.set(calendars)
        if set(calendars) != old_calendars:
            said.append(f"calendars: {', '.join(c.name for c in calendars) or 'none'}")
        moved: list[tuple[Schedule, list[str]]] = []
        said += _apply_to_zones(schedule, set(data["zones"]), data.get("building"), moved)
        change = "; ".join(said) or "no change"
        audit(by, _subject(schedule), change, data["reason"])
        for other, names in moved:
            audit(
                by,
                _subject(other),
                f"rooms moved to schedule '{schedule.name}': {', '.join(names)}",
                data["reason"],
            )
    return schedule, f"Recorded: {change}"


def _closure_calendar(choice: str, schedule: Schedule) -> SiteCalendar:
    if choice and choice != NEW_CALENDAR:
        found = SiteCalendar.objects.filter(pk=int(choice)).first()
        if found is None:
            raise ValidationError("That calendar no longer exists: choose another.")
        return found
    name = f"{schedule.name} closures"[:100]
    calendar, _ = SiteCalendar.objects.get_or_create(name=name)
    return calendar


def _apply_to_zones(
    schedule: Schedule,
    chosen: set[Zone],
    building: MeterNode | None,
    moved: list[tuple[Schedule, list[str]]],
) -> list:
    """The schedule heats the chosen rooms and every room of the building; rooms unticked stop
    following it (they keep their own setpoints: frost protection always applies)."""
    said = []
    if building is not None:
        in_building = zones_in(building)
        if not in_building:
            raise ValidationError(empty_building(building))
        chosen |= set(in_building)
    before = set(Zone.objects.filter(schedule=schedule))
    # A room follows one schedule: one taken from another is said in the message and audited
    # on that schedule too, never silently.
    taken: dict[Schedule, list[str]] = {}
    for z in (
        Zone.objects.filter(pk__in=[z.pk for z in chosen])
        .exclude(schedule=None)
        .exclude(schedule=schedule)
        .select_related("schedule")
    ):
        taken.setdefault(z.schedule, []).append(z.name)
    for other, names in sorted(taken.items(), key=lambda item: item[0].name):
        said.append(
            f"moved from schedule '{other.name}' (a room follows one schedule): "
            + ", ".join(sorted(names))
        )
        moved.append((other, sorted(names)))
    Zone.objects.filter(schedule=schedule).exclude(pk__in=[z.pk for z in chosen]).update(
        schedule=None
    )
    Zone.objects.filter(pk__in=[z.pk for z in chosen]).update(schedule=schedule)
    if chosen != before:
        names = ", ".join(sorted(z.name for z in chosen)) or "none"
        where = f" (building '{building.name}')" if building is not None else ""
        said.append(f"rooms{where}: {names}")
    return said


@staff_page
def rooms(request: HttpRequest) -> HttpResponse:
    """Where each room is in the metering tree, so a schedule can be applied to a building."""
    zones = list(Zone.objects.select_related("place__node", "schedule").order_by("name"))
    nodes = list(MeterNode.objects.select_related("parent").order_by("name"))
    may_edit = is_engineer(request.user)
    current = {
        f"zone_{z.pk}": str(z.place.node_id) for z in zones if hasattr(z, "place") and z.place
    }
    status = 200
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        form = RoomsForm(request.POST, zones=zones, nodes=nodes)
        if form.is_valid():
            change = _save_places(form, zones, nodes)
            if change:
                audit(request.user, "rooms in buildings", change, form.cleaned_data["reason"])
                messages.success(request, f"Saved: {change}")
            else:
                messages.info(request, "Nothing changed.")
            return redirect("staff-rooms")
        status = 400
    else:
        form = RoomsForm(zones=zones, nodes=nodes, initial=current)
    if not may_edit:
        for field in form.fields.values():
            field.disabled = True
    return render(
        request,
        "staff/rooms.html",
        {"nav": "schedules", "form": form, "may_edit": may_edit, "has_nodes": bool(nodes)},
        status=status,
    )


def _save_places(form: RoomsForm, zones: list[Zone], nodes: list[MeterNode]) -> str:
    by_pk = {str(n.pk): n for n in nodes}
    said = []
    with transaction.atomic():
        for zone in zones:
            chosen = form.cleaned_data.get(f"zone_{zone.pk}") or ""
            place = ZonePlace.objects.filter(zone=zone).first()
            was = str(place.node_id) if place else ""
            if chosen == was:
                continue
            if not chosen:
                place.delete()
                said.append(f"{zone.name}: not placed")
                continue
            ZonePlace.objects.update_or_create(zone=zone, defaults={"node": by_pk[chosen]})
            said.append(f"{zone.name} in {by_pk[chosen].name}")
    return "; ".join(said)
