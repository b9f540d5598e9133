"""Heat mains are configured in the admin: an engineer adds one with its sources (bounds and a
relay another rule drives refused, the field named); a viewer may look but not change."""

from __future__ import annotations

import pytest
from django.test import Client

from control.models import HeatingPlant, HeatMain, HeatSource
from sensors.models import Actuator

pytestmark = pytest.mark.django_db

URL = "/admin/control/heatmain/add/"


def _form(**main) -> dict:
    data = {
        "name": "Heat main", "flow_setpoint_c": 75, "stage_up_k": 5, "stage_up_s": 600,
        "stage_down_k": 5, "stage_down_s": 300, "rotate_weekly": "on", "rotate_hours": 0,
        "sensor_stale_after_s": 900, "enabled": "on",
        "sources-TOTAL_FORMS": 0, "sources-INITIAL_FORMS": 0, "sources-MIN_NUM_FORMS": 0,
        "sources-MAX_NUM_FORMS": 1000,
        "store-TOTAL_FORMS": 0, "store-INITIAL_FORMS": 0, "store-MIN_NUM_FORMS": 0,
        "store-MAX_NUM_FORMS": 1,
    }  # fmt: skip
    data.update(main)
    return data


def _source(i: int, actuator: Actuator, **kw) -> dict:
    row = {"order": i + 1, "name": actuator.name, "actuator": actuator.pk, "rotate": "on",
           "ramp_s": 120, **kw}  # fmt: skip
    return {f"sources-{i}-{k}": v for k, v in row.items()}


def test_an_engineer_adds_a_heat_main_with_its_sources(engineer):
    gas1 = Actuator.objects.create(name="Gas 1", kind="boiler", host="10.0.0.2", coil=0)
    gas2 = Actuator.objects.create(name="Gas 2", kind="boiler", host="10.0.0.2", coil=1)
    c = Client()
    c.force_login(engineer)
    assert c.get(URL).status_code == 200
    data = _form(**{"sources-TOTAL_FORMS": 2}) | _source(0, gas1) | _source(1, gas2)
    assert c.post(URL, data).status_code == 302
    main = HeatMain.objects.get()
    assert [s.name for s in main.sources.all()] == ["Gas 1", "Gas 2"]


def test_a_bad_setting_or_a_relay_driven_elsewhere_is_refused_with_the_field_named(engineer):
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host="10.0.0.2", coil=0)
    HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
    c = Client()
    c.force_login(engineer)
    response = c.post(URL, _form(flow_setpoint_c=96))
    assert "flow_setpoint_c" in response.context["adminform"].form.errors
    data = _form(**{"sources-TOTAL_FORMS": 1}) | _source(0, boiler)
    response = c.post(URL, data)
    errors = response.context["inline_admin_formsets"][0].formset.errors
    assert errors[0]["actuator"] == [
        "Actuator 'Boiler' is already the boiler of heating plant 'Boiler house'."
    ]
    assert not HeatMain.objects.exists() and not HeatSource.objects.exists()


def test_a_viewer_cannot_add_a_heat_main(viewer):
    c = Client()
    c.force_login(viewer)
    assert c.get("/admin/control/heatmain/").status_code == 200
    assert c.post(URL, _form()).status_code == 403
    assert not HeatMain.objects.exists()


def test_a_heat_sources_relay_cannot_be_claimed_by_a_plant_or_a_zone(engineer):
    from control.claims import conflict

    gas = Actuator.objects.create(name="Gas 1", kind="boiler", host="10.0.0.2", coil=0)
    main = HeatMain.objects.create(name="Heat main")
    source = HeatSource.objects.create(heat_main=main, name="Gas 1", actuator=gas)
    expected = "Actuator 'Gas 1' is already heat source 'Gas 1' of heat main 'Heat main'."
    assert conflict([gas], claimant="plant") == expected
    assert conflict([gas], zone_id=None) == expected
    assert conflict([gas], claimant="heat source", heat_source_id=source.pk) == ""  # itself


def test_a_store_pump_driven_elsewhere_is_refused_and_a_store_pump_cannot_be_claimed():
    from django.core.exceptions import ValidationError

    from control.claims import conflict
    from control.models import ThermalStore
    from sensors.models import Node, Sensor

    node = Node.objects.create(name="store-node")
    top = Sensor.objects.create(node=node, key="top", kind="temperature")
    bottom = Sensor.objects.create(node=node, key="bottom", kind="temperature")
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host="10.0.0.2", coil=0)
    pump = Actuator.objects.create(name="Pump", kind="pump", host="10.0.0.2", coil=1)
    HeatingPlant.objects.create(name="Boiler house", boiler=boiler, pump=pump)
    main = HeatMain.objects.create(name="Heat main")
    store = ThermalStore(heat_main=main, name="Buffer", top_sensor=top, bottom_sensor=bottom,
                         charge_pump=pump)  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        store.full_clean()
    assert refused.value.message_dict["charge_pump"] == [
        "Actuator 'Pump' is already the pump of heating plant 'Boiler house'."
    ]
    own = Actuator.objects.create(name="Store pump", kind="pump", host="10.0.0.2", coil=2)
    store.charge_pump = own
    store.full_clean()
    store.save()
    assert conflict([own], claimant="plant") == (
        "Actuator 'Store pump' is already the charge pump of thermal store 'Buffer'."
    )
    assert conflict([own], claimant="thermal store", store_id=store.pk) == ""
