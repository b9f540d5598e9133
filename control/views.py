"""Staff pages: plant status (/staff/control/), replay (/staff/control/replay/<zone>/),
room booking calendar (/staff/bookings/<zone>/).

Roles (core/roles.py): every staff role may look; engineers override plant and run replays;
bookers and engineers create, move and cancel bookings; viewers only read.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from control import bookings, calendar, holds, runtime
from control.forms import BookingForm, OutputOverrideForm, OverrideForm, ReplayForm
from control.heat_main_status import heat_main_rows
from control.models import Booking, HeatingPlant, OutputOverride, Override, SolarCircuit, Zone
from control.replay import replay
from control.status import actuator_status, board_rows, output_rows, zone_status
from core.live import live_every_s, live_json, wants_live
from core.pages import staff_page
from core.permissions import is_engineer, user_groups
from core.roles import BOOKERS
from feeds.store.phpfina import FeedError


def _tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def can_book(user) -> bool:
    return is_engineer(user) or BOOKERS in user_groups(user)


def _redirect_to_week(zone: Zone, day: date) -> HttpResponse:
    """Back to the zone's calendar, showing the week of `day` (weeks start on Monday)."""
    monday = day - timedelta(days=day.weekday())
    return redirect(f"{reverse('control:bookings', args=[zone.slug])}?week={monday}")


@staff_page
def plant_status(request: HttpRequest) -> HttpResponse:
    """The page, or with ?live=1 its live part as JSON (core/live.py): no reload wipes a form."""
    context = _status_context(request)
    if wants_live(request):
        return live_json(request, "control/_status_live.html", context)
    engineer = is_engineer(request.user)
    context.update(
        form=OverrideForm() if engineer else None,
        output_form=OutputOverrideForm() if engineer and context["circuits_out"] else None,
    )
    # Links to each plant's schematic (control/schematic_views.py).
    context.update(
        plants=HeatingPlant.objects.order_by("name"), circuits=SolarCircuit.objects.order_by("name")
    )
    return render(request, "control/status.html", context)


def _status_context(request: HttpRequest) -> dict:
    zones = zone_status()
    in_zones = {a["id"] for z in zones for a in z["actuators"]}
    others = [a for a in actuator_status() if a["id"] not in in_zones]
    overrides = Override.objects.not_over().select_related("zone", "actuator", "created_by")
    circuits = output_rows()
    return {
        "zones": zones,
        "others": others,
        "overrides": overrides,
        "circuits_out": circuits,
        "heat_mains": heat_main_rows(),
        "boards": board_rows(),
        "any_output_override": any(c["override"] for c in circuits),
        "last_tick": runtime.load_last_tick(),
        "may_override": is_engineer(request.user),
        "live_every": live_every_s(),
        "nav": "control",
    }


@staff_page
@require_POST
def create_override(request: HttpRequest) -> HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may override plant.")
    form = OverrideForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("control:status")
    kind, _, pk = form.cleaned_data["target"].partition(":")
    now = timezone.now()
    override = Override(
        zone_id=int(pk) if kind == "zone" else None,
        actuator_id=int(pk) if kind == "actuator" else None,
        state=form.cleaned_data["state"],
        starts=now,
        expires=now + form.expires_after(),
        reason=form.cleaned_data["reason"],
    )
    try:
        holds.place(override, request.user)  # the model's rules, as the API and admin apply them
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("control:status")
    messages.success(request, "Override set: it applies from the next control tick.")
    return redirect("control:status")


@staff_page
@require_POST
def cancel_override(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may cancel overrides.")
    holds.cancel(get_object_or_404(Override, pk=pk), request.user)
    messages.success(request, "Override cancelled: normal control resumes at the next tick.")
    return redirect("control:status")


@staff_page
@require_POST
def create_output_override(request: HttpRequest) -> HttpResponse:
    """Hold a plant's analogue output; the same role as relay overrides (engineers)."""
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may override plant.")
    form = OutputOverrideForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("control:status")
    now = timezone.now()
    held = OutputOverride(
        plant_id=int(form.cleaned_data["plant"]),
        value=form.cleaned_data["value"],
        expires=now + timedelta(minutes=form.cleaned_data["minutes"]),
        reason=form.cleaned_data["reason"],
    )
    try:
        holds.place(held, request.user, now=now)  # the model's rules, as the API and admin's
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("control:status")
    messages.success(request, "Output override set: it applies from the next control tick.")
    return redirect("control:status")


@staff_page
@require_POST
def cancel_output_override(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may cancel overrides.")
    holds.cancel(get_object_or_404(OutputOverride, pk=pk), request.user)
    messages.success(
        request, "Output override cancelled: weather compensation resumes at the next tick."
    )
    return redirect("control:status")


@staff_page
def replay_view(request: HttpRequest, zone_slug: str) -> HttpResponse:
    # Engineers only (CONTROL.md): a replay reads a zone's whole history and runs the evaluator
    # up to 20,000 steps, seconds of a worker per request, and judges a strategy only engineers
    # may change. Refused before the zone is looked up, so a viewer learns nothing of zones.
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may run replays.")
    zone = get_object_or_404(
        Zone.objects.select_related("temperature_sensor__feed"), slug=zone_slug
    )
    form = ReplayForm(request.GET or None)
    report = None
    error = ""
    end = None
    if form.is_bound and form.is_valid():
        tz = _tz()
        start = datetime.combine(form.cleaned_data["start"], datetime.min.time(), tzinfo=tz)
        end = datetime.combine(
            form.cleaned_data["end"] + timedelta(days=1), datetime.min.time(), tzinfo=tz
        )
        try:
            report = replay(zone, start, end, form.cleaned_data.get("step"))
        except (ValueError, FeedError) as exc:
            error = str(exc)
    # "To today" ends at now (the future has no readings): say so, so nobody looks for this
    # evening's bookings.
    stopped_at_now = report is not None and report.end < end
    return render(
        request,
        "control/replay.html",
        {
            "zone": zone,
            "form": form,
            "report": report,
            "error": error,
            "stopped_at_now": stopped_at_now,
        },
    )


# --- bookings ------------------------------------------------------------------------------


@staff_page
def booking_index(request: HttpRequest) -> HttpResponse:
    """Every bookable room's week at a glance: its bookings and schedule periods per day."""
    tz = _tz()
    monday = _week_start(request, tz)
    zones = list(Zone.objects.filter(bookable=True).select_related("schedule").order_by("name"))
    days = [monday + timedelta(days=i) for i in range(7)]
    rooms = []
    for zone in zones:
        blocks = calendar.week_blocks(zone, monday, tz)
        closures = calendar.day_exceptions(zone, monday)
        rooms.append(
            {
                "zone": zone,
                "cells": [{"items": blocks[day], "note": _day_note(closures, day)} for day in days],
            }
        )
    today = timezone.now().astimezone(tz).date()
    return render(
        request,
        "control/booking_index.html",
        {
            "zones": zones,
            "rooms": rooms,
            "days": [{"date": day, "today": day == today} for day in days],
            "monday": monday,
            "prev_week": monday - timedelta(days=7),
            "next_week": monday + timedelta(days=7),
            "tz": tz,
        },
    )


# How far from today a week may be asked for: 9999-12-31 or 0001-01-01 overflowed the date
# arithmetic of the week's days and its neighbours (a 500).
WEEK_BOUND_DAYS = 100 * 366
MAX_ID = 2**31 - 1  # the largest id every supported database's integer key holds


def _week_start(request: HttpRequest, tz: ZoneInfo) -> date:
    text = request.GET.get("week")
    today = timezone.now().astimezone(tz).date()
    try:
        day = date.fromisoformat(text) if text else today
    except ValueError:
        day = today
    if abs((day - today).days) > WEEK_BOUND_DAYS:
        messages.warning(request, "Weeks more than 100 years from today are not shown: this week.")
        day = today
    return day - timedelta(days=day.weekday())


@staff_page
def booking_calendar(request: HttpRequest, zone_slug: str) -> HttpResponse:
    zone = get_object_or_404(Zone, slug=zone_slug)
    tz = _tz()
    monday = _week_start(request, tz)
    if request.method == "POST":
        if not can_book(request.user):
            raise PermissionDenied("Your role may only read bookings.")
        form = BookingForm(request.POST, zone=zone, may_book_past=is_engineer(request.user))
        if form.is_valid():
            booking = Booking(
                zone=zone,
                title=form.cleaned_data["title"],
                start=form.cleaned_data["start_at"],
                end=form.cleaned_data["end_at"],
                setpoint=form.cleaned_data["setpoint"],
            )
            bookings.book(booking, request.user, Booking.Source.STAFF_PAGE)
            messages.success(request, f"Booked: {booking}")
            return _redirect_to_week(zone, form.cleaned_data["day"])
        status = 400
    else:
        # Today or later: the Monday of the week shown is in the past most days of the week.
        today = timezone.now().astimezone(tz).date()
        form = BookingForm(
            zone=zone, initial={"day": max(today, monday)}, may_book_past=is_engineer(request.user)
        )
        status = 200
    return render(
        request,
        "control/bookings.html",
        _calendar_context(request, zone, monday, form, tz),
        status=status,
    )


def _calendar_context(request, zone: Zone, monday: date, form, tz: ZoneInfo) -> dict:
    blocks = calendar.week_blocks(zone, monday, tz)
    hours = calendar.hours_to_draw(blocks)
    placed = calendar.place(blocks, hours)
    now = timezone.now().astimezone(tz)
    today = now.date()
    start = datetime.combine(monday, datetime.min.time(), tzinfo=tz)
    end = start + timedelta(days=7)
    closures = calendar.day_exceptions(zone, monday)
    # How much of today's column has passed (%): shaded, and a click there books nothing (a
    # start in the past is refused anyway); days before today are not clickable at all.
    drawn_from, drawn = hours[0] * 60, len(hours) * 60
    now_minutes = now.hour * 60 + now.minute
    past_pct = min(100.0, max(0.0, (now_minutes - drawn_from) / drawn * 100))
    return {
        "zone": zone,
        "days": [
            {
                "date": day,
                "items": items,
                "today": day == today,
                "past": day < today,
                "note": _day_note(closures, day),
            }
            for day, items in placed.items()
        ],
        "now_minutes": now_minutes,
        "past_pct": past_pct,
        "undo": _undoable(request, zone),
        "hours": list(hours),
        "monday": monday,
        "prev_week": monday - timedelta(days=7),
        "next_week": monday + timedelta(days=7),
        "form": form,
        "may_book": can_book(request.user),
        "listed": list(zone.bookings.filter(start__lt=end, end__gt=start).order_by("start")),
        "tz": tz,
    }


def _day_note(closures: dict, day: date) -> str:
    """ "Closed: Christmas" or "Special day: Open day": why the schedule differs that day."""
    found = closures.get(day)
    if found is None:
        return ""
    if not found.occupied:
        return f"Closed: {found.description or 'holiday'}"
    return f"Special day: {found.description or 'special hours'}"


def _undoable(request: HttpRequest, zone: Zone) -> Booking | None:
    """The booking this person has just cancelled (?cancelled=<id>), offered back with Undo."""
    try:
        pk = int(request.GET.get("cancelled", ""))
    except ValueError:
        return None
    if not 0 < pk <= MAX_ID:
        return None  # a database integer could not hold it (a 500 on SQLite, not "not found")
    return Booking.objects.filter(
        pk=pk, zone=zone, cancelled=True, cancelled_by=request.user.get_username()
    ).first()


@staff_page
def booking_edit(request: HttpRequest, zone_slug: str, pk: int) -> HttpResponse:
    zone = get_object_or_404(Zone, slug=zone_slug)
    booking = get_object_or_404(Booking, pk=pk, zone=zone)
    if not can_book(request.user):
        raise PermissionDenied("Your role may only read bookings.")
    tz = _tz()
    if request.method == "POST":
        form = BookingForm(
            request.POST, zone=zone, booking=booking, may_book_past=is_engineer(request.user)
        )
        if form.is_valid():
            booking.title = form.cleaned_data["title"]
            booking.start = form.cleaned_data["start_at"]
            booking.end = form.cleaned_data["end_at"]
            booking.setpoint = form.cleaned_data["setpoint"]
            bookings.move(booking, request.user)
            messages.success(request, f"Moved: {booking}")
            return _redirect_to_week(zone, form.cleaned_data["day"])
        status = 400
    else:
        s = booking.start.astimezone(tz)
        form = BookingForm(
            zone=zone,
            booking=booking,
            may_book_past=is_engineer(request.user),
            initial={
                "title": booking.title,
                "day": s.date(),
                "start": s.time().replace(second=0),
                "end": booking.end.astimezone(tz).time().replace(second=0),
                "setpoint": booking.setpoint,
            },
        )
        status = 200
    return render(
        request,
        "control/booking_edit.html",
        {"zone": zone, "booking": booking, "form": form},
        status=status,
    )


@staff_page
def booking_cancel(request: HttpRequest, zone_slug: str, pk: int) -> HttpResponse:
    """GET: are you sure? POST: cancel, then back to the week with Undo offered."""
    zone = get_object_or_404(Zone, slug=zone_slug)
    booking = get_object_or_404(Booking, pk=pk, zone=zone)
    if not can_book(request.user):
        raise PermissionDenied("Your role may only read bookings.")
    week = booking.start.astimezone(_tz()).date()
    back = f"{reverse('control:bookings', args=[zone.slug])}?week={week - timedelta(days=week.weekday())}"
    if request.method != "POST":
        return render(
            request, "control/booking_cancel.html", {"zone": zone, "booking": booking, "back": back}
        )
    bookings.cancel(booking, request.user)  # kept: an iCal sync keeps it cancelled
    messages.success(request, f"Cancelled: {booking}")
    return redirect(f"{back}&cancelled={booking.pk}")


@staff_page
@require_POST
def booking_restore(request: HttpRequest, zone_slug: str, pk: int) -> HttpResponse:
    """Undo a cancel, unless the time has been booked meanwhile (then say by what)."""
    zone = get_object_or_404(Zone, slug=zone_slug)
    booking = get_object_or_404(Booking, pk=pk, zone=zone)
    if not can_book(request.user):
        raise PermissionDenied("Your role may only read bookings.")
    if not booking.cancelled:
        # A second click on Undo (or two people at once): it is booked, say so, change nothing.
        messages.info(request, f"Already booked: {booking}")
        return _redirect_to_week(zone, booking.start.astimezone(_tz()).date())
    if not booking.cancelled_by_person:
        # Its iCal feed cancelled it: the feed is where it is booked, and its next sync wins.
        messages.error(request, f"Not restored: {booking.title} was cancelled in its iCal feed.")
        return _redirect_to_week(zone, booking.start.astimezone(_tz()).date())
    try:
        bookings.restore(booking, request.user)
        messages.success(request, f"Restored: {booking}")
    except ValidationError as exc:
        messages.error(request, f"Not restored: {' '.join(exc.messages)}")
    return _redirect_to_week(zone, booking.start.astimezone(_tz()).date())
