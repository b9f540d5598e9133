"""Staff pages: plant status (/staff/control/), replay (/staff/control/replay/<zone>/),
room booking calendar (/staff/bookings/<zone>/).

Roles (bms/roles.py): every staff role may look; engineers override plant and run replays;
bookers and engineers create, move and cancel bookings; viewers only read.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from functools import wraps
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from bms.live import live_every_s, live_json, wants_live
from bms.permissions import has_staff_role, is_engineer, user_groups
from bms.roles import BOOKERS
from control import runtime
from control.forms import BookingForm, OverrideForm, ReplayForm
from control.models import Booking, HeatingPlant, Override, SolarCircuit, Zone
from control.replay import replay
from control.status import actuator_status, zone_status
from feeds.phpfina import FeedError

HOURS = range(6, 23)  # calendar rows, local time


def _tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def can_view(user) -> bool:
    return has_staff_role(user)


def can_book(user) -> bool:
    return is_engineer(user) or BOOKERS in user_groups(user)


def staff_page(view):
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not can_view(request.user):
            raise PermissionDenied("You need a staff role (engineers, bookers or viewers).")
        return view(request, *args, **kwargs)

    return wrapper


def _redirect_to_week(zone: Zone, day: date) -> HttpResponse:
    """Back to the zone's calendar, showing the week of `day` (weeks start on Monday)."""
    monday = day - timedelta(days=day.weekday())
    return redirect(f"{reverse('control:bookings', args=[zone.slug])}?week={monday}")


@staff_page
def plant_status(request: HttpRequest) -> HttpResponse:
    """The page, or with ?live=1 its live part as JSON (bms/live.py): no reload wipes a form."""
    context = _status_context(request)
    if wants_live(request):
        return live_json(request, "control/_status_live.html", context)
    context.update(form=OverrideForm() if is_engineer(request.user) else None)
    # Links to each plant's schematic (control/schematic_views.py).
    context.update(
        plants=HeatingPlant.objects.order_by("name"), circuits=SolarCircuit.objects.order_by("name")
    )
    return render(request, "control/status.html", context)


def _status_context(request: HttpRequest) -> dict:
    zones = zone_status()
    in_zones = {a["id"] for z in zones for a in z["actuators"]}
    others = [a for a in actuator_status() if a["id"] not in in_zones]
    overrides = Override.objects.filter(cancelled=False, expires__gt=timezone.now()).select_related(
        "zone", "actuator", "created_by"
    )
    return {
        "zones": zones,
        "others": others,
        "overrides": overrides,
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
    Override.objects.create(
        zone_id=int(pk) if kind == "zone" else None,
        actuator_id=int(pk) if kind == "actuator" else None,
        state=form.cleaned_data["state"],
        starts=now,
        expires=now + form.expires_after(),
        reason=form.cleaned_data["reason"],
        created_by=request.user,
    )
    messages.success(request, "Override set: it applies from the next control tick.")
    return redirect("control:status")


@staff_page
@require_POST
def cancel_override(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may cancel overrides.")
    get_object_or_404(Override, pk=pk).cancel(by=request.user.get_username())
    messages.success(request, "Override cancelled: normal control resumes at the next tick.")
    return redirect("control:status")


@staff_page
def replay_view(request: HttpRequest, zone_slug: str) -> HttpResponse:
    zone = get_object_or_404(
        Zone.objects.select_related("temperature_sensor__feed"), slug=zone_slug
    )
    form = ReplayForm(request.GET or None)
    report = None
    error = ""
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
    return render(
        request,
        "control/replay.html",
        {"zone": zone, "form": form, "report": report, "error": error},
    )


# --- bookings ------------------------------------------------------------------------------


@staff_page
def booking_index(request: HttpRequest) -> HttpResponse:
    return render(
        request, "control/booking_index.html", {"zones": Zone.objects.filter(bookable=True)}
    )


def _week_start(text: str | None, tz: ZoneInfo) -> date:
    try:
        day = date.fromisoformat(text) if text else timezone.now().astimezone(tz).date()
    except ValueError:
        day = timezone.now().astimezone(tz).date()
    return day - timedelta(days=day.weekday())


@staff_page
def booking_calendar(request: HttpRequest, zone_slug: str) -> HttpResponse:
    zone = get_object_or_404(Zone, slug=zone_slug)
    tz = _tz()
    monday = _week_start(request.GET.get("week"), tz)
    if request.method == "POST":
        if not can_book(request.user):
            raise PermissionDenied("Your role may only read bookings.")
        form = BookingForm(request.POST, zone=zone)
        if form.is_valid():
            booking = Booking(
                zone=zone,
                title=form.cleaned_data["title"],
                start=form.cleaned_data["start_at"],
                end=form.cleaned_data["end_at"],
                setpoint=form.cleaned_data["setpoint"],
                booked_by=request.user.get_username(),
                source=Booking.Source.STAFF_PAGE,
            )
            booking.full_clean()
            booking.save()
            messages.success(request, f"Booked: {booking}")
            return _redirect_to_week(zone, form.cleaned_data["day"])
        status = 400
    else:
        form = BookingForm(zone=zone, initial={"day": monday})
        status = 200
    return render(
        request,
        "control/bookings.html",
        _calendar_context(request, zone, monday, form, tz),
        status=status,
    )


def _calendar_context(request, zone: Zone, monday: date, form, tz: ZoneInfo) -> dict:
    start = datetime.combine(monday, datetime.min.time(), tzinfo=tz)
    end = start + timedelta(days=7)
    bookings = list(zone.bookings.filter(start__lt=end, end__gt=start).order_by("start"))
    first_hour, last_hour = HOURS.start, HOURS.stop
    days = []
    for i in range(7):
        day = monday + timedelta(days=i)
        items = []
        for b in bookings:
            s, e = b.start.astimezone(tz), b.end.astimezone(tz)
            if s.date() > day or e.date() < day:
                continue
            top_min = max((s.hour * 60 + s.minute) if s.date() == day else 0, first_hour * 60)
            end_min = min((e.hour * 60 + e.minute) if e.date() == day else 24 * 60, last_hour * 60)
            if end_min <= top_min:
                end_min = top_min + 15  # outside the drawn hours: still show a sliver
            items.append(
                {
                    "booking": b,
                    "start": s,
                    "end": e,
                    "top": (top_min - first_hour * 60) * 100 / ((last_hour - first_hour) * 60),
                    "height": (end_min - top_min) * 100 / ((last_hour - first_hour) * 60),
                }
            )
        days.append(
            {"date": day, "items": items, "today": day == timezone.now().astimezone(tz).date()}
        )
    return {
        "zone": zone,
        "days": days,
        "hours": list(HOURS),
        "monday": monday,
        "prev_week": monday - timedelta(days=7),
        "next_week": monday + timedelta(days=7),
        "form": form,
        "may_book": can_book(request.user),
        "listed": bookings,
        "tz": tz,
    }


@staff_page
def booking_edit(request: HttpRequest, zone_slug: str, pk: int) -> HttpResponse:
    zone = get_object_or_404(Zone, slug=zone_slug)
    booking = get_object_or_404(Booking, pk=pk, zone=zone)
    if not can_book(request.user):
        raise PermissionDenied("Your role may only read bookings.")
    tz = _tz()
    if request.method == "POST":
        form = BookingForm(request.POST, zone=zone, booking=booking)
        if form.is_valid():
            with transaction.atomic():
                booking.title = form.cleaned_data["title"]
                booking.start = form.cleaned_data["start_at"]
                booking.end = form.cleaned_data["end_at"]
                booking.setpoint = form.cleaned_data["setpoint"]
                booking.full_clean()
                booking.save()
            messages.success(request, f"Moved: {booking}")
            return _redirect_to_week(zone, form.cleaned_data["day"])
        status = 400
    else:
        s = booking.start.astimezone(tz)
        form = BookingForm(
            zone=zone,
            booking=booking,
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
@require_POST
def booking_cancel(request: HttpRequest, zone_slug: str, pk: int) -> HttpResponse:
    zone = get_object_or_404(Zone, slug=zone_slug)
    booking = get_object_or_404(Booking, pk=pk, zone=zone)
    if not can_book(request.user):
        raise PermissionDenied("Your role may only read bookings.")
    booking.cancel(by=request.user.get_username())  # kept: an iCal sync keeps it cancelled
    messages.success(request, f"Cancelled: {booking}")
    week = booking.start.astimezone(_tz()).date()
    return redirect(
        f"{reverse('control:bookings', args=[zone.slug])}?week={week - timedelta(days=week.weekday())}"
    )
