"""Staff pages for the plant schematics (control/schematic.py): one per heating plant and solar
circuit, live-updated in place like plant status (core/live.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from control.heat_main_schematic import heat_main_schematic
from control.models import HeatingPlant, HeatMain, SolarCircuit
from control.schematic import plant_schematic, solar_schematic
from core.live import live_every_s, live_json, wants_live
from core.pages import staff_page


def _page(request: HttpRequest, diagram: dict, kind: str) -> HttpResponse:
    context = {
        "diagram": diagram,
        "kind": kind,
        "live_every": live_every_s(),
        "nav": "control",
        "plants": HeatingPlant.objects.order_by("name"),
        "circuits": SolarCircuit.objects.order_by("name"),
    }
    if wants_live(request):
        return live_json(request, "control/_schematic_live.html", context)
    return render(request, "control/schematic.html", context)


@staff_page
def heating_plant(request: HttpRequest, pk: int) -> HttpResponse:
    plant = get_object_or_404(HeatingPlant.objects.select_related("boiler", "pump"), pk=pk)
    return _page(request, plant_schematic(plant), "Heating plant")


@staff_page
def solar_circuit(request: HttpRequest, pk: int) -> HttpResponse:
    circuit = get_object_or_404(
        SolarCircuit.objects.select_related("pump", "collector_sensor", "tank_sensor"), pk=pk
    )
    return _page(request, solar_schematic(circuit), "Solar circuit")


@staff_page
def heat_main(request: HttpRequest, pk: int) -> HttpResponse:
    main = get_object_or_404(HeatMain.objects.select_related("flow_sensor"), pk=pk)
    return _page(request, heat_main_schematic(main), "Heat main")
