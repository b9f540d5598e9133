"""Staff pages for the plant itself: heating plants with their weather compensation
(/staff/plants/<id>/) and solar circuits (/staff/plants/solar/<id>/), listed at /staff/plants/.

Roles as on the schedule pages (core/roles.py): engineers change them; every other staff role
reads the same values as a table, with no form and no button, and a POST from them is 403.
Every change is stored with who, when, what and why (ProgrammeChange) and listed on the page.
The rules are the models' (staff/plant_forms.py): what the admin and the API refuse, this
refuses, with the model's message next to the field; a refusal stores nothing.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from control.change_audit import audit, changes, snapshot, words_for
from control.models import HeatingPlant, ProgrammeChange, SolarCircuit, WeatherCompensation
from core.pages import staff_page
from core.permissions import is_engineer
from staff.plant_forms import (
    BOILER_WORDS,
    CURVE_ROOM_C,
    PLANT_WORDS,
    SOLAR_WORDS,
    WEATHER_WORDS,
    PlantForm,
    SolarForm,
    WeatherForm,
    curve_table,
    read_only_rows,
)
from staff.schedules import RECENT_CHANGES

ONLY_ENGINEERS = "Only engineers may change heating plants and solar circuits."
ADD_WEATHER = "add_weather"  # the checkbox that gives a plant without one a heating curve
TICK_FOR_WEATHER = (
    "These weather compensation settings were not saved: tick 'Give this plant weather "
    "compensation' to give it a heating curve, or leave them as they were."
)


def plant_subject(plant: HeatingPlant) -> str:
    return f"heating plant '{plant.name}'"


def solar_subject(circuit: SolarCircuit) -> str:
    return f"solar circuit '{circuit.name}'"


def _weather(plant: HeatingPlant | None) -> WeatherCompensation | None:
    if plant is None:
        return None
    try:
        return plant.weather
    except WeatherCompensation.DoesNotExist:
        return None


def _record(request: HttpRequest, subject: str, said: list[str], created: bool, form) -> None:
    """Audit a save (who, what, why) and tell the engineer what was recorded."""
    change = ("created: " if created else "") + ("; ".join(said) or "no change")
    audit(request.user, subject, change, form.cleaned_data["reason"])
    messages.success(request, f"Saved {subject}: control uses it from the next tick.")
    messages.info(request, f"Recorded: {change}")


def _changes_of(subject: str | None) -> list[ProgrammeChange]:
    if subject is None:
        return []
    return list(ProgrammeChange.objects.filter(subject=subject)[:RECENT_CHANGES])


@staff_page
def plant_list(request: HttpRequest) -> HttpResponse:
    plants = HeatingPlant.objects.select_related("boiler", "pump", "weather").prefetch_related(
        "zones"
    )
    circuits = SolarCircuit.objects.select_related("collector_sensor", "tank_sensor", "pump")
    audited = Q(subject__startswith="heating plant '") | Q(subject__startswith="solar circuit '")
    return render(
        request,
        "staff/plants.html",
        {
            "nav": "control",
            "plants": [{"plant": p, "weather": _weather(p)} for p in plants],
            "circuits": circuits,
            "may_edit": is_engineer(request.user),
            "changes": ProgrammeChange.objects.filter(audited)[:RECENT_CHANGES],
        },
    )


@staff_page
def plant_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    plant = get_object_or_404(HeatingPlant, pk=pk) if pk is not None else None
    weather = _weather(plant)
    may_edit = is_engineer(request.user)
    if plant is None and not may_edit:
        raise PermissionDenied(ONLY_ENGINEERS)
    status = 200
    form = weather_form = None
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        before = snapshot(plant, PLANT_WORDS) if plant else {}
        weather_before = snapshot(weather, WEATHER_WORDS) if weather else {}
        form = PlantForm(request.POST, instance=plant or HeatingPlant())
        with_weather = weather is not None or bool(request.POST.get(ADD_WEATHER))
        weather_form = WeatherForm(
            request.POST if with_weather else None, instance=weather or WeatherCompensation()
        )
        valid = form.is_valid()
        refused_weather = ""
        if not with_weather and _weather_typed(request.POST):
            # A curve typed without the box would be thrown away: say so, store nothing.
            weather_form = WeatherForm(request.POST, instance=WeatherCompensation())
            weather_form.instance.plant = form.instance
            refused_weather, valid = TICK_FOR_WEATHER, False
        if with_weather:
            # WeatherCompensation.clean reads the plant's sensors: the ones being saved.
            weather_form.instance.plant = form.instance
            valid = weather_form.is_valid() and valid
        if valid:
            with transaction.atomic():
                saved = form.save()
                said = changes(before, snapshot(saved, PLANT_WORDS), PLANT_WORDS)
                said += form.save_boiler_times()
                if with_weather:
                    weather_form.instance.plant = saved
                    curve = weather_form.save()
                    words = words_for(curve)  # the fields of its mode and output only
                    said += [
                        f"weather compensation: {c}"
                        for c in changes(weather_before, snapshot(curve, words), words)
                    ]
                _record(request, plant_subject(saved), said, plant is None, form)
            return redirect("staff-plant-edit", pk=saved.pk)
        status = 400
    else:
        refused_weather = ""
        if may_edit:
            form = PlantForm(instance=plant or HeatingPlant())
            weather_form = WeatherForm(instance=weather or WeatherCompensation())
    return render(
        request,
        "staff/plant_edit.html",
        {
            "nav": "control",
            "plant": plant,
            "weather": weather,
            "form": form,
            "weather_form": weather_form,
            "add_weather": request.POST.get(ADD_WEATHER) if request.method == "POST" else "",
            "refused_weather": refused_weather,
            "may_edit": may_edit,
            "rows": read_only_rows(plant, PLANT_WORDS) + _boiler_rows(plant) if plant else [],
            "weather_rows": read_only_rows(weather, words_for(weather)) if weather else [],
            "curve": curve_table(weather) if weather else [],
            "curve_room_c": CURVE_ROOM_C,
            "changes": _changes_of(plant_subject(plant) if plant else None),
        },
        status=status,
    )


def _weather_typed(posted) -> bool:
    """Whether weather compensation fields were changed from a new curve's defaults."""
    if not any(key.startswith("weather-") for key in posted):
        return False
    return WeatherForm(posted, instance=WeatherCompensation()).has_changed()


def _boiler_rows(plant: HeatingPlant) -> list[tuple[str, str]]:
    return [(label, str(getattr(plant.boiler, name))) for name, label in BOILER_WORDS.items()]


@staff_page
def solar_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    circuit = get_object_or_404(SolarCircuit, pk=pk) if pk is not None else None
    may_edit = is_engineer(request.user)
    if circuit is None and not may_edit:
        raise PermissionDenied(ONLY_ENGINEERS)
    status = 200
    form = None
    if request.method == "POST":
        if not may_edit:
            raise PermissionDenied(ONLY_ENGINEERS)
        before = snapshot(circuit, SOLAR_WORDS) if circuit else {}
        form = SolarForm(request.POST, instance=circuit or SolarCircuit())
        if form.is_valid():
            with transaction.atomic():
                saved = form.save()
                said = changes(before, snapshot(saved, SOLAR_WORDS), SOLAR_WORDS)
                _record(request, solar_subject(saved), said, circuit is None, form)
            return redirect("staff-solar-edit", pk=saved.pk)
        status = 400
    elif may_edit:
        form = SolarForm(instance=circuit or SolarCircuit())
    return render(
        request,
        "staff/solar_edit.html",
        {
            "nav": "control",
            "circuit": circuit,
            "form": form,
            "may_edit": may_edit,
            "rows": read_only_rows(circuit, SOLAR_WORDS) if circuit else [],
            "changes": _changes_of(solar_subject(circuit) if circuit else None),
        },
        status=status,
    )
