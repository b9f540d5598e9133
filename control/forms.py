"""Forms of the staff pages: bookings (create / move), overrides, replay; the heating plant's
form, shared by the admin and the staff plant page (staff/plant_forms.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from control.models import MAX_OVERRIDE, Booking, HeatingPlant, WeatherCompensation, Zone
from core.choice_fields import bounded_formfield
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
        label="Setpoint (°C)",
        required=False,
        min_value=5,
        max_value=30,
        help_text="5–30 °C; empty: the room's comfort setpoint",
    )

    def __init__(
        self,
        *args,
        zone: Zone,
        booking: Booking | None = None,
        may_book_past: bool = False,
        now: datetime | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.zone = zone
        self.booking = booking
        self.now = now or timezone.now()
        if may_book_past:
            # Engineers may record a booking after the fact (a room used without booking), but
            # only by saying so: a past day is otherwise a slip of the date picker.
            self.fields["confirm_past"] = forms.BooleanField(
                label="Yes, book it in the past",
                required=False,
                help_text="Engineers only: records a booking that has already started.",
            )

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        tz = _tz()
        start = datetime.combine(data["day"], data["start"], tzinfo=tz)
        end = datetime.combine(data["day"], data["end"], tzinfo=tz)
        if end <= start:
            raise ValidationError({"end": "The booking must end after it starts (same day)."})
        moved = self.booking is None or start != self.booking.start
        if moved and start < self.now:
            # A booking that has already started (its start unchanged) may still be edited.
            if "confirm_past" not in self.fields:
                raise ValidationError(
                    {"day": "This is in the past: book today or a later day and time."}
                )
            if not data.get("confirm_past"):
                raise ValidationError(
                    {
                        "confirm_past": "This starts in the past: tick to book it anyway, "
                        "or pick a later day and time."
                    }
                )
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
        min_value=0.05, max_value=MAX_OVERRIDE.days * 24, initial=2, help_text="Expires after"
    )
    reason = forms.CharField(max_length=200)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        zones = [(f"zone:{z.pk}", f"Zone: {z.name}") for z in Zone.objects.all()]
        valve_relays = WeatherCompensation.objects.values_list("open_actuator", "close_actuator")
        driven = {pk for pair in valve_relays for pk in pair if pk is not None}
        acts = [
            (f"actuator:{a.pk}", f"Actuator: {a.name}")
            for a in Actuator.objects.filter(enabled=True).exclude(pk__in=driven)
        ]
        self.fields["target"].choices = zones + acts

    def expires_after(self) -> timedelta:
        return timedelta(hours=self.cleaned_data["hours"])


class OutputOverrideForm(forms.Form):
    """Hold a weather-compensated plant's output (OutputOverride.clean has the range rules)."""

    plant = forms.ChoiceField(label="Circuit", help_text="A weather-compensated plant.")
    value = forms.FloatField(
        label="Hold at",
        min_value=0,
        max_value=100,
        help_text="Valve % (0 closed, 100 open); a boiler's flow set point in °C",
    )
    minutes = forms.IntegerField(
        label="For (minutes)", min_value=1, max_value=24 * 60, initial=60, help_text="1–1440"
    )
    reason = forms.CharField(max_length=200)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from control.models import WeatherCompensation

        self.fields["plant"].choices = [
            (
                str(w.plant_id),
                f"{w.plant.name} ({'°C' if w.mode == w.Mode.BOILER_SETPOINT else '%'})",
            )
            for w in WeatherCompensation.objects.filter(enabled=True)
            .select_related("plant")
            .order_by("plant__name")
        ]


class ReplayForm(forms.Form):
    start = forms.DateField(label="From", widget=iso_date_input())
    end = forms.DateField(label="To (inclusive)", widget=iso_date_input())
    step = forms.IntegerField(
        label="Step (seconds)",
        required=False,
        min_value=10,
        max_value=86400,
        help_text="Seconds per step; empty: automatic",
        widget=forms.NumberInput(attrs={"placeholder": "auto", "step": 10}),
    )

    def clean(self) -> dict:
        data = super().clean()
        if not self.errors and data["end"] < data["start"]:
            raise ValidationError({"end": "Must not be before the start."})
        if not self.errors and (data["end"] - data["start"]).days > 92:
            raise ValidationError({"end": "Replay at most 3 months at a time."})
        return data


class HeatingPlantForm(forms.ModelForm):
    """A heating plant with its members: the admin's form, and the base of the staff page's."""

    class Meta:
        model = HeatingPlant
        fields = "__all__"
        formfield_callback = bounded_formfield  # rooms: an id past 64 bits is a 400, not a 500

    def clean(self):
        cleaned = super().clean()
        zones = cleaned.get("zones")
        if zones is not None:
            # The model's clean() (control/plant_rules.py) checks against the zones being saved.
            self.instance.member_zone_ids = {z.pk for z in zones}
        return cleaned
