"""Forms of the heating plant and solar circuit pages (staff/plants.py), in plain words.

The rules are the models' own, the ones the admin and the API run: a ModelForm calls each
model's full_clean() (field bounds, HeatingPlant.clean with the zones being saved as
control/plant_rules.py wants them, WeatherCompensation.clean, SolarCircuit.clean, the actuator
claims of control/claims.py). Nothing here repeats a rule; only the words are the page's.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from control.change_audit import snapshot, thing_words
from control.engine.weather import heating_curve
from control.forms import HeatingPlantForm
from control.models import SolarCircuit, WeatherCompensation, Zone
from control.plant_words import BOILER_WORDS, PLANT_WORDS, SHOWN_FOR, SOLAR_WORDS, WEATHER_WORDS
from sensors.models import Actuator, Sensor, Site
from staff.schedule_forms import reason_field

# Outside temperatures of the curve's table, and the room set point it is drawn for (the
# tick uses the warmest calling room's target; 20 °C is the usual comfort set point).
CURVE_OUTSIDE_C = (-15, -10, -5, 0, 5, 10, 15)
CURVE_ROOM_C = 20.0


class _ThingChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return thing_words(obj)


class _PlainErrors:
    """Model rules that name a field this form does not show (WeatherCompensation.clean's
    `plant`) are shown above the form instead: Django would raise ValueError on them."""

    def add_error(self, field: str | None, error: Any) -> None:
        if isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            unknown = [f for f in error.error_dict if f not in self.fields]  # type: ignore[attr-defined]
            if unknown:
                moved = error.error_dict
                for name in unknown:
                    moved.setdefault(NON_FIELD_ERRORS, []).extend(moved.pop(name))
        super().add_error(field, error)  # type: ignore[misc]


def _worded(form: forms.BaseForm, words: dict[str, str]) -> None:
    for name, label in words.items():
        if name in form.fields:
            form.fields[name].label = label
            form.fields[name].help_text = ""  # the model's help names units the label already says


def _sensors() -> Any:
    return Sensor.objects.select_related("node").order_by("node__name", "key")


class _SiteChoice:
    """The plant's site: the only site without asking (a hidden field, and the default when a
    client leaves it out); a choice when there are several; none when there is no site."""

    only_site: Site | None = None

    def _choose_site(self) -> None:
        fields, instance = self.fields, self.instance  # type: ignore[attr-defined]
        sites = list(Site.objects.order_by("name")[:2])
        if not sites:
            del fields["site"]
            return
        fields["site"].queryset = Site.objects.order_by("name")
        if len(sites) == 1:
            self.only_site = sites[0]
            fields["site"].widget = forms.HiddenInput()
            if instance.site_id is None:
                self.initial["site"] = sites[0].pk  # type: ignore[attr-defined]
        else:
            fields["site"].required = True
            fields["site"].empty_label = "(choose the site)"

    def clean_site(self) -> Site | None:
        return self.cleaned_data.get("site") or self.only_site  # type: ignore[attr-defined]


class PlantForm(_SiteChoice, _PlainErrors, HeatingPlantForm):
    """A heating plant; the boiler's anti-short-cycle times ride along (saved on the boiler)."""

    # Not required: a new plant does not know its boiler yet, and a blank keeps the boiler's
    # own times rather than overwriting them with a default nobody typed.
    min_on_s = forms.IntegerField(min_value=0, required=False, label=BOILER_WORDS["min_on_s"])
    min_off_s = forms.IntegerField(min_value=0, required=False, label=BOILER_WORDS["min_off_s"])
    reason = reason_field()

    class Meta(HeatingPlantForm.Meta):
        fields = list(PLANT_WORDS)
        field_classes = {
            name: _ThingChoice
            for name in ("boiler", "pump", "outside_sensor", "flow_sensor", "return_sensor")
        }
        widgets = {"zones": forms.CheckboxSelectMultiple}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _worded(self, PLANT_WORDS)
        self._choose_site()
        for name in ("outside_sensor", "flow_sensor", "return_sensor"):
            self.fields[name].queryset = _sensors()
        self.fields["zones"].queryset = Zone.objects.order_by("name")
        self.fields["index_zone"].empty_label = "(the first room by name)"
        boiler = self.instance.boiler if self.instance.boiler_id else None
        for name in BOILER_WORDS:
            self.fields[name].initial = getattr(boiler, name) if boiler else None
            self.fields[name].help_text = "" if boiler else "Blank keeps the boiler's own."

    def clean(self) -> dict:
        data = super().clean()
        for name in BOILER_WORDS:
            if data.get(name) is None:
                continue
            # The bound is the actuator's own (sensors.models.Actuator), as in its admin and API.
            try:
                Actuator._meta.get_field(name).run_validators(data[name])
            except ValidationError as exc:
                self.add_error(name, exc)
        return data

    def save_boiler_times(self) -> list[str]:
        """Set the boiler's minimum run and rest times; what changed, in words."""
        boiler: Actuator = self.instance.boiler
        said = []
        for name, label in BOILER_WORDS.items():
            value = self.cleaned_data[name]
            if value is not None and getattr(boiler, name) != value:
                said.append(f"{label} {getattr(boiler, name)} → {value}")
                setattr(boiler, name, value)
        if said:
            boiler.save(update_fields=list(BOILER_WORDS))
        return said


class WeatherForm(_PlainErrors, forms.ModelForm):
    """The plant's heating curve and its output (WeatherCompensation.clean's rules)."""

    class Meta:
        model = WeatherCompensation
        fields = list(WEATHER_WORDS)
        field_classes = {"open_actuator": _ThingChoice, "close_actuator": _ThingChoice}

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("prefix", "weather")
        super().__init__(*args, **kwargs)
        _worded(self, WEATHER_WORDS)
        # A class on the field's box: the page shows it only for its mode and output
        # (staff/_plant_style.html), so a modulating boiler is not offered a valve's gain.
        for name, shown_for in SHOWN_FOR.items():
            self.fields[name].shown_for = shown_for  # type: ignore[attr-defined]


class SolarForm(_SiteChoice, _PlainErrors, forms.ModelForm):
    reason = reason_field()

    class Meta:
        model = SolarCircuit
        fields = list(SOLAR_WORDS)
        field_classes = {name: _ThingChoice for name in ("pump", "collector_sensor", "tank_sensor")}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _worded(self, SOLAR_WORDS)
        self._choose_site()
        for name in ("collector_sensor", "tank_sensor"):
            self.fields[name].queryset = _sensors()


def curve_table(weather: WeatherCompensation) -> list[tuple[int, float]]:
    """(outside °C, flow °C) of the curve for a room at CURVE_ROOM_C, with the engine's own
    function (control/engine/weather.py), so the table is what the tick will ask for."""
    return [
        (
            outside,
            heating_curve(
                outside,
                CURVE_ROOM_C,
                weather.slope,
                weather.shift_k,
                weather.flow_min_c,
                weather.flow_max_c,
            ),
        )
        for outside in CURVE_OUTSIDE_C
    ]


def read_only_rows(instance: Any, words: dict[str, str]) -> list[tuple[str, str]]:
    shown = snapshot(instance, words)
    return [(label, shown[name] or "—") for name, label in words.items()]
