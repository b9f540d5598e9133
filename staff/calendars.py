"""Site calendars on the staff pages: closures and special days as date ranges, shared by every
schedule that uses the calendar, with the country's public holidays (the maintained `holidays`
library) offered as a starting list. Engineers change them; other roles read. Audited."""

from __future__ import annotations

from datetime import date

import holidays
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from control.change_audit import audit
from control.models import CalendarEntry, ProgrammeChange, SiteCalendar
from core.pages import staff_page
from core.permissions import is_engineer
from staff.schedule_forms import CalendarForm, EntryForm, HolidaysForm
from staff.schedules import ONLY_ENGINEERS, RECENT_CHANGES


def _subject(calendar: SiteCalendar) -> str:
    return f"calendar '{calendar.name}'"


def public_holidays(calendar: SiteCalendar, year: int) -> dict[date, str]:
    """The public holidays of the calendar's country (and region) in `year`; {} with no
    country. Raises ValueError naming the code the library does not know."""
    if not calendar.country:
        return {}
    try:
        found = holidays.country_holidays(
            calendar.country, subdiv=calendar.subdivision or None, years=year
        )
    except NotImplementedError as exc:
        where = calendar.country + (f"-{calendar.subdivision}" if calendar.subdivision else "")
        raise ValueError(f"No public holidays are known for '{where}': {exc}") from exc
    return dict(sorted(found.items()))


def _offered(calendar: SiteCalendar, year: int) -> tuple[list[tuple[str, str]], str]:
    """(choices of holidays not yet in the calendar, error)."""
    try:
        found = public_holidays(calendar, year)
    except ValueError as exc:
        return [], str(exc)
    have = set(calendar.entries.filter(first_day__year=year).values_list("first_day", flat=True))
    return [
        (day.isoformat(), f"{day:%a %d %b %Y}: {name}")
        for day, name in found.items()
        if day not in have
    ], ""


@staff_page
def calendar_list(request: HttpRequest) -> HttpResponse:
    may_edit = is_engineer(request.user)
    status = 200
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        form = CalendarForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            calendar = SiteCalendar.objects.create(
                name=data["name"], country=data["country"], subdivision=data["subdivision"]
            )
            audit(request.user, _subject(calendar), "created", data["reason"])
            messages.success(request, f"Calendar '{calendar.name}' created: add its days below.")
            return redirect("staff-calendar", pk=calendar.pk)
        status = 400
    else:
        form = CalendarForm()
    return render(
        request,
        "staff/calendars.html",
        {
            "nav": "schedules",
            "calendars": SiteCalendar.objects.prefetch_related("entries", "schedules"),
            "form": form if may_edit else None,
            "may_edit": may_edit,
        },
        status=status,
    )


def _year(request: HttpRequest) -> int:
    this_year = timezone.localdate().year
    try:
        year = int(request.GET.get("year", this_year))
    except ValueError:
        return this_year
    return year if 2000 <= year <= 2100 else this_year


@staff_page
def calendar_detail(request: HttpRequest, pk: int) -> HttpResponse:
    calendar = get_object_or_404(SiteCalendar, pk=pk)
    may_edit = is_engineer(request.user)
    year = _year(request)
    entry_form = EntryForm()
    offered, holiday_error = _offered(calendar, year)
    holiday_form = HolidaysForm(offered=offered, initial={"year": year})
    status = 200
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        # The page comes back on the year just worked on (#28 leftover: the holiday picker
        # went back to this year after a closure was added for the next).
        if "add_holidays" in request.POST:
            done, holiday_form = _add_holidays(request, calendar)
            worked_on = holiday_form.cleaned_data["year"] if done else year
        else:
            done, entry_form = _add_entry(request, calendar)
            worked_on = entry_form.cleaned_data["first_day"].year if done else year
        if done:
            return redirect(f"{request.path}?year={worked_on}")
        status = 400
    return render(
        request,
        "staff/calendar_detail.html",
        {
            "nav": "schedules",
            "calendar": calendar,
            "entries": calendar.entries.all(),
            "schedules": calendar.schedules.all(),
            "entry_form": entry_form,
            "holiday_form": holiday_form,
            "holiday_error": holiday_error,
            "year": year,
            "may_edit": may_edit,
            "changes": ProgrammeChange.objects.filter(subject=_subject(calendar))[:RECENT_CHANGES],
        },
        status=status,
    )


def _add_entry(request: HttpRequest, calendar: SiteCalendar) -> tuple[bool, EntryForm]:
    form = EntryForm(request.POST)
    if not form.is_valid():
        return False, form
    data = form.cleaned_data
    entry = CalendarEntry(
        calendar=calendar,
        first_day=data["first_day"],
        last_day=data.get("last_day") or data["first_day"],
        description=data["description"],
        occupied=data["occupied"],
        start=data.get("start"),
        end=data.get("end"),
    )
    try:
        entry.full_clean()
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return False, form
    entry.save()
    kind = "special day" if entry.occupied else "closure"
    audit(request.user, _subject(calendar), f"{kind} {entry} added", data["reason"])
    messages.success(request, f"Added {kind}: {entry}")
    return True, form


def _add_holidays(request: HttpRequest, calendar: SiteCalendar) -> tuple[bool, HolidaysForm]:
    try:
        year = int(request.POST.get("year", ""))
    except ValueError:
        year = 0
    offered, _error = _offered(calendar, year) if 2000 <= year <= 2100 else ([], "")
    form = HolidaysForm(request.POST, offered=offered)
    if not form.is_valid():
        return False, form
    # Names come from the library again, never from the browser.
    names = public_holidays(calendar, form.cleaned_data["year"])
    added = []
    for text in form.cleaned_data["days"]:
        day = date.fromisoformat(text)
        entry = CalendarEntry(
            calendar=calendar, first_day=day, last_day=day, description=names[day]
        )
        try:
            entry.full_clean()
        except ValidationError as exc:
            form.add_error("days", exc.messages)
            return False, form
        entry.save()
        added.append(str(entry))
    if added:
        audit(
            request.user,
            _subject(calendar),
            "public holidays added: " + "; ".join(added),
            form.cleaned_data["reason"],
        )
        messages.success(request, f"Added {len(added)} public holiday(s).")
    else:
        messages.info(request, "No holiday ticked: nothing added.")
    return True, form


@staff_page
@require_POST
def entry_delete(request: HttpRequest, pk: int, entry_pk: int) -> HttpResponse:
    calendar = get_object_or_404(SiteCalendar, pk=pk)
    entry = get_object_or_404(CalendarEntry, pk=entry_pk, calendar=calendar)
    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS)
    reason = request.POST.get("reason", "").strip()[:200]
    if not reason:
        messages.error(request, "reason: say why the day is removed (kept for the audit).")
        return redirect("staff-calendar", pk=calendar.pk)
    audit(request.user, _subject(calendar), f"{entry} removed", reason)
    entry.delete()
    messages.success(request, f"Removed: {entry}")
    return redirect(f"{reverse('staff-calendar', args=[calendar.pk])}?year={entry.first_day.year}")
