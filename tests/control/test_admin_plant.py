"""The plant admin pages load and validate (registered here until control/admin.py imports them)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client

import control.admin_plant  # noqa: F401  (registers the ModelAdmins)
from control.admin_plant import zone_status_links
from control.models import HeatingPlant, Zone
from sensors.models import Actuator

pytestmark = pytest.mark.django_db

# The weather compensation inline's management form, with no row.
INLINE = {"weather-TOTAL_FORMS": 0, "weather-INITIAL_FORMS": 0, "weather-MIN_NUM_FORMS": 0,
          "weather-MAX_NUM_FORMS": 1}  # fmt: skip


def test_plant_admin_pages(superuser):
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host="10.0.0.2")
    HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
    c = Client()
    c.force_login(superuser)
    for model in ("heatingplant", "solarcircuit", "zonetuning", "optimumstartlog", "nodecommand",
                  "relayboard", "analoguecommand"):  # fmt: skip
        assert c.get(f"/admin/control/{model}/").status_code == 200, model
    assert c.get("/admin/control/heatingplant/add/").status_code == 200
    # Same actuator as boiler and pump: refused with the field named.
    response = c.post(
        "/admin/control/heatingplant/add/",
        {"name": "Bad", "boiler": boiler.pk, "pump": boiler.pk, "pump_overrun_s": 360,
         "pump_kick_idle_days": 7, "pump_kick_s": 30, "enabled": "on", "flow_frost_c": 5,
         "frost_outside_c": 1.5, **INLINE},
    )  # fmt: skip
    assert response.status_code == 200
    assert "The pump must be a different actuator from the boiler." in response.content.decode()
    assert admin.site.is_registered(HeatingPlant)


def test_zone_links():
    zone = Zone.objects.create(name="Hall", slug="hall")
    html = zone_status_links(zone)
    assert "/staff/control/#zone-hall" in html and "/staff/bookings/hall/" in html
    assert "/staff/control/replay/hall/" in html


def test_actuator_state_and_why(redis_client):
    from control import runtime
    from control.admin_plant import actuator_state_and_why

    act = Actuator.objects.create(name="Valve", host="10.0.0.2")
    assert actuator_state_and_why(act).startswith("unknown")
    runtime.save_actuators(
        {
            act.pk: runtime.ActuatorRuntime(
                on=True, confirmed=True, reason="Frost protection: 4.0 °C"
            )
        }
    )
    assert actuator_state_and_why(act) == "ON — Frost protection: 4.0 °C"
    runtime.save_actuators(
        {act.pk: runtime.ActuatorRuntime(on=False, fault="no answer", reason="x")}
    )
    assert actuator_state_and_why(act) == "OFF (FAULT: no answer) — x"
