"""Forms of the schedule and calendar pages: a whole week of periods typed into one form, the
calendars and a closure, and where the schedule applies (a building of the metering tree and/or
chosen rooms); every change with a reason for the audit (control.models.ProgrammeChange)."""

from __future__ import annotations

from datetime import time

import holidays
from django import forms
from django.core.exceptions import ValidationError

from control.forms import iso_date_input, iso_time_input
from control.models import CALENDAR_ENTRY_MAX_DAYS, Schedule, SchedulePeriod, SiteCalendar, Zone
from core.choice_fields import BoundedModelMultipleChoiceField
from energy.models import MeterNode
from staff.models import zones_in

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Rows a day offers on the page: enough for a morning and an evening with a gap, and a lunch
# break; a schedule made in the admin with more shows them all, up to the bound.
PERIOD_ROWS = 3
MAX_PERIODS_A_DAY = 6
NEW_CALENDAR = "new"
SETPOINT_MIN, SETPOINT_MAX = 5.0, 30.0


def reason_field() -> forms.CharField:
    return forms.CharField(
        max_length=200,
        label="Why (for the audit)",
        help_text="Kept with who and when, e.g. 'Spring term hours'.",
    )


class ScheduleForm(forms.Form):
    """One form for a week of periods, its calendars, a closure and the rooms it heats.

    Period fields are named d<weekday>_<row>_start|end|setpoint (weekday 0 = Monday)."""

    name = forms.CharField(max_length=100)
    calendars = BoundedModelMultipleChoiceField(
        queryset=SiteCalendar.objects.all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Site calendars (closures and special days)",
    )
    closure_first = forms.DateField(
        required=False, label="Add a closure: from", widget=iso_date_input()
    )
    closure_last = forms.DateField(required=False, label="to (inclusive)", widget=iso_date_input())
    closure_description = forms.CharField(
        required=False, max_length=200, label="Closure name", help_text="e.g. Christmas closure"
    )
    closure_calendar = forms.ChoiceField(required=False, label="Add it to calendar")
    building = forms.ModelChoiceField(
        queryset=MeterNode.objects.filter(kind=MeterNode.Kind.BUILDING).order_by("name"),
        required=False,
        label="Apply to every room of building",
        empty_label="(no building)",
    )
    zones = BoundedModelMultipleChoiceField(
        queryset=Zone.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Rooms following this schedule",
    )
    reason = reason_field()

    def __init__(self, *args, schedule: Schedule | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.schedule = schedule
        self.rows = PERIOD_ROWS
        if schedule is not None:
            per_day = [0] * 7
            for p in schedule.periods.all():
                per_day[p.weekday] += 1
            self.rows = min(max(PERIOD_ROWS, max(per_day) + 1), MAX_PERIODS_A_DAY)
        for day in range(7):
            for row in range(self.rows):
                prefix = f"d{day}_{row}"
                self.fields[f"{prefix}_start"] = forms.TimeField(
                    required=False, widget=iso_time_input(), label=f"{WEEKDAYS[day]} from"
                )
                self.fields[f"{prefix}_end"] = forms.TimeField(
                    required=False, widget=iso_time_input(), label="to"
                )
                self.fields[f"{prefix}_setpoint"] = forms.FloatField(
                    required=False,
                    min_value=SETPOINT_MIN,
                    max_value=SETPOINT_MAX,
                    label="°C",
                    widget=forms.NumberInput(attrs={"step": "0.5", "placeholder": "comfort"}),
                )
        self.fields["closure_calendar"].choices = [
            (NEW_CALENDAR, "a new calendar for this schedule"),
            *[(str(c.pk), c.name) for c in SiteCalendar.objects.all()],
        ]

    def initial_from(self, schedule: Schedule) -> dict:
        """The form's initial values from a stored schedule."""
        initial: dict = {
            "name": schedule.name,
            "calendars": list(schedule.calendars.all()),
            "zones": list(schedule.zones.all()),
        }
        rows = [0] * 7
        for p in schedule.periods.order_by("weekday", "start"):
            row = rows[p.weekday]
            if row >= self.rows:
                continue
            rows[p.weekday] += 1
            prefix = f"d{p.weekday}_{row}"
            initial[f"{prefix}_start"] = p.start
            initial[f"{prefix}_end"] = p.end
            initial[f"{prefix}_setpoint"] = p.setpoint
        return initial

    def week(self) -> list[list[dict]]:
        """The period fields by day and row, for the template: [day][row] -> bound fields."""
        return [
            {
                "name": WEEKDAYS[day],
                "number": day,
                "rows": [
                    {part: self[f"d{day}_{row}_{part}"] for part in ("start", "end", "setpoint")}
                    for row in range(self.rows)
                ],
            }
            for day in range(7)
        ]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        taken = Schedule.objects.filter(name=name)
        if self.schedule is not None:
            taken = taken.exclude(pk=self.schedule.pk)
        if taken.exists():
            raise ValidationError("Another schedule has this name.")
        return name

    def clean(self) -> dict:
        data = super().clean()
        periods: list[tuple[int, time, time, float | None]] = []
        # Every error at once (#28): the period rules of the model (SchedulePeriod.clean: no
        # zero-length period, no overlap) are checked here on the form's own periods, beside
        # the field, with the name and closure errors, not one kind after another on save.
        made: list[SchedulePeriod] = []
        for day in range(7):
            for row in range(self.rows):
                prefix = f"d{day}_{row}"
                start, end = data.get(f"{prefix}_start"), data.get(f"{prefix}_end")
                if start is None and end is None:
                    continue
                if start is None or end is None:
                    missing = f"{prefix}_start" if start is None else f"{prefix}_end"
                    self.add_error(missing, f"{WEEKDAYS[day]}: give both a start and an end.")
                    continue
                period = SchedulePeriod(weekday=day, start=start, end=end)
                if self._period_problem(period, made, prefix):
                    continue
                made.append(period)
                periods.append((day, start, end, data.get(f"{prefix}_setpoint")))
        data["periods"] = periods
        building = data.get("building")
        if building is not None and not zones_in(building):
            self.add_error("building", empty_building(building))
        first, last = data.get("closure_first"), data.get("closure_last")
        described = data.get("closure_description", "")
        if first or last or described:
            if first is None:
                self.add_error("closure_first", "A closure needs its first day.")
            if not described:
                self.add_error("closure_description", "Name the closure, e.g. Christmas closure.")
            if first is not None:
                last = last or first
                data["closure_last"] = last
                if last < first:
                    self.add_error("closure_last", "Must not be before the first day.")
                elif (last - first).days + 1 > CALENDAR_ENTRY_MAX_DAYS:
                    self.add_error(
                        "closure_last",
                        f"A closure may span at most {CALENDAR_ENTRY_MAX_DAYS} days.",
                    )
        return data

    def _period_problem(
        self, period: SchedulePeriod, made: list[SchedulePeriod], prefix: str
    ) -> bool:
        day = WEEKDAYS[period.weekday]
        try:
            period.clean()  # no schedule yet: the rules of the period alone
        except ValidationError as exc:
            self.add_error(f"{prefix}_end", f"{day}: {' '.join(exc.messages)}")
            return True
        for earlier in made:
            if period.overlaps(earlier):
                self.add_error(f"{prefix}_start", f"{day}: {period.overlap_message(earlier)}")
                return True
        return False

    def new_periods(self, schedule: Schedule) -> list[SchedulePeriod]:
        return [
            SchedulePeriod(schedule=schedule, weekday=day, start=start, end=end, setpoint=setpoint)
            for day, start, end, setpoint in self.cleaned_data["periods"]
        ]


class CalendarForm(forms.Form):
    name = forms.CharField(max_length=100)
    country = forms.CharField(
        max_length=2,
        required=False,
        initial="GB",
        help_text="Two-letter country code for public holidays, e.g. GB, IE, FR.",
    )
    subdivision = forms.CharField(
        max_length=8, required=False, help_text="Region, e.g. WLS (Wales), SCT, ENG, NIR."
    )
    reason = reason_field()

    def __init__(self, *args, calendar: SiteCalendar | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calendar = calendar

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        taken = SiteCalendar.objects.filter(name=name)
        if self.calendar is not None:
            taken = taken.exclude(pk=self.calendar.pk)
        if taken.exists():
            raise ValidationError("Another calendar has this name.")
        return name

    def clean_country(self) -> str:
        return self.cleaned_data["country"].strip().upper()

    def clean_subdivision(self) -> str:
        return self.cleaned_data["subdivision"].strip().upper()

    def clean(self) -> dict:
        """A country or region the holidays library does not know is named now, not when its
        holidays are first asked for."""
        data = super().clean()
        country, region = data.get("country"), data.get("subdivision")
        if not country:
            if region:
                self.add_error("subdivision", "A region needs its country.")
            return data
        if country not in holidays.list_supported_countries():
            self.add_error("country", f"No public holidays are known for '{country}'.")
        elif region and region not in holidays.list_supported_countries()[country]:
            known = ", ".join(holidays.list_supported_countries()[country][:12])
            self.add_error("subdivision", f"'{country}' has no region '{region}' (known: {known}).")
        return data


class EntryForm(forms.Form):
    """A closure or special day; the rules are CalendarEntry.clean's."""

    first_day = forms.DateField(widget=iso_date_input(), label="From")
    last_day = forms.DateField(
        widget=iso_date_input(), required=False, label="To (inclusive)", help_text="Empty: one day"
    )
    description = forms.CharField(max_length=200, label="Name")
    occupied = forms.BooleanField(
        required=False, label="Special day (occupied)", help_text="Unticked: closed all day."
    )
    start = forms.TimeField(widget=iso_time_input(), required=False, label="Occupied from")
    end = forms.TimeField(widget=iso_time_input(), required=False, label="to")
    reason = reason_field()


class HolidaysForm(forms.Form):
    """Public holidays offered from the `holidays` library: the engineer ticks those to add."""

    year = forms.IntegerField(min_value=2000, max_value=2100)
    days = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    reason = reason_field()

    def __init__(self, *args, offered: list[tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["days"].choices = offered


class RoomsForm(forms.Form):
    """Where each room is in the metering tree: field zone_<id> -> a tree node or none."""

    reason = reason_field()

    def __init__(self, *args, zones: list[Zone], nodes: list[MeterNode], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.zones = zones
        choices = [("", "(not placed)"), *[(str(n.pk), _node_label(n)) for n in nodes]]
        for zone in zones:
            self.fields[f"zone_{zone.pk}"] = forms.ChoiceField(
                choices=choices, required=False, label=zone.name
            )

    def rows(self) -> list[tuple[Zone, forms.BoundField]]:
        return [(zone, self[f"zone_{zone.pk}"]) for zone in self.zones]


def empty_building(building: MeterNode) -> str:
    return f"No room is placed in '{building.name}' yet: place rooms on the Rooms page first."


def _node_label(node: MeterNode) -> str:
    building = node.building()
    if building is None or building.pk == node.pk:
        return f"{node.name} ({node.get_kind_display()})"
    return f"{node.name} ({node.get_kind_display()} in {building.name})"
