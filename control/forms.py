"""Forms of the staff pages: bookings (create / move), overrides, replay."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from control.models import Booking, Zone
from sensors.models import Actuator


def _tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


# Browsers accept only ISO values in <input type=date|time> and drop anything else (the en-gb
# "24/11/2026" included), leaving the field empty: render these widgets in ISO whatever the locale.
def iso_date_input() -> forms.DateInput:
    return forms.DateInput(format="%Y-%m-%d", attrs={"type": "date"})


def iso_time_input() -> forms.TimeInput:
    return forms.TimeInput(format="%H:%M", attrs={"type": "time"})


class BookingForm(forms.Form):
    title = forms.CharField(max_length=200)
    day = forms.DateField(widget=iso_date_input())
    start = forms.TimeField(widget=iso_time_input())
    end = forms.TimeField(widget=iso_time_input())
    setpoint = forms.FloatField(
        required=False,
        min_value=5,
        max_value=30,
        help_text="°C; empty: the room's comfort setpoint",
    )

    def __init__(self, *args, zone: Zone, booking: Booking | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.zone = zone
        self.booking = booking

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        tz = _tz()
        start = datetime.combine(data["day"], data["start"], tzinfo=tz)
        end = datetime.combine(data["day"], data["end"], tzinfo=tz)
        if end <= start:
            raise ValidationError({"end": "The booking must end after it starts (same day)."})
        # The rules themselves are the model's (Booking.clean), shared with the API and admin.
        candidate = Booking(
            pk=self.booking.pk if self.booking is not None else None,
            zone=self.zone,
            start=start,
            end=end,
            setpoint=data.get("setpoint"),
        )
        try:
            candidate.clean()
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {None: exc.messages}
            for name, messages in errors.items():
                # "zone" is not a field of this form: it is about the whole booking.
                self.add_error(name if name in self.fields else None, messages)
            return data
        data["start_at"], data["end_at"] = start, end
        return data


class OverrideForm(forms.Form):
    target = forms.ChoiceField(help_text="A whole zone, or one actuator.")
    state = forms.TypedChoiceField(choices=[("1", "ON"), ("0", "OFF")], coerce=lambda v: v == "1")
    hours = forms.FloatField(
        min_value=0.05, max_value=24 * 14, initial=2, help_text="Expires after"
    )
    reason = forms.CharField(max_length=200)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        zones = [(f"zone:{z.pk}", f"Zone: {z.name}") for z in Zone.objects.all()]
        acts = [
            (f"actuator:{a.pk}", f"Actuator: {a.name}")
            for a in Actuator.objects.filter(enabled=True)
        ]
        self.fields["target"].choices = zones + acts

    def expires_after(self) -> timedelta:
        return timedelta(hours=self.cleaned_data["hours"])


class ReplayForm(forms.Form):
    start = forms.DateField(label="From", widget=iso_date_input())
    end = forms.DateField(label="To (inclusive)", widget=iso_date_input())
    step = forms.IntegerField(
        required=False,
        min_value=10,
        max_value=86400,
        help_text="Seconds per step; empty: automatic",
    )

    def clean(self) -> dict:
        data = super().clean()
        if not self.errors and data["end"] < data["start"]:
            raise ValidationError({"end": "Must not be before the start."})
        if not self.errors and (data["end"] - data["start"]).days > 92:
            raise ValidationError({"end": "Replay at most 3 months at a time."})
        return data
