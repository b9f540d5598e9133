"""One coil, one actuator; one actuator, one consistent claim.

Two actuators on one board, unit and coil were accepted, and with opposite demands the boiler
coil flipped every tick. Both are refused now: in the model (admin form), the API (400 naming
the field) and the database (unique constraint)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from control.models import HeatingPlant, SolarCircuit, Zone
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db

BOILER = {"name": "Boiler", "kind": "boiler", "host": "10.0.0.7", "port": 502, "device_id": 1,
          "coil": 17}  # fmt: skip


def test_the_api_refuses_a_second_actuator_on_one_coil(engineer_api):
    assert engineer_api.post("/api/v1/actuators", BOILER, format="json").status_code == 201
    second = {**BOILER, "name": "Boiler again", "host": " 10.0.0.7"}
    response = engineer_api.post("/api/v1/actuators", second, format="json")
    assert response.status_code == 400
    [message] = response.json()["fields"]["coil"]
    assert "Coil 17 of unit 1 on 10.0.0.7:502 is already driven by actuator 'Boiler'" in message
    assert Actuator.objects.count() == 1


def test_other_coils_units_and_disabled_spares_are_accepted(engineer_api):
    assert engineer_api.post("/api/v1/actuators", BOILER, format="json").status_code == 201
    for change in ({"coil": 18}, {"device_id": 2}, {"port": 503}, {"enabled": False}):
        body = {**BOILER, "name": f"Other {sorted(change)}", **change}
        assert engineer_api.post("/api/v1/actuators", body, format="json").status_code == 201
    # The disabled spare cannot be enabled while the boiler holds the coil.
    spare = Actuator.objects.get(enabled=False)
    response = engineer_api.patch(f"/api/v1/actuators/{spare.pk}", {"enabled": True}, format="json")
    assert response.status_code == 400 and "coil" in response.json()["fields"]


def test_a_viewer_cannot_create_actuators(viewer_api):
    assert viewer_api.post("/api/v1/actuators", BOILER, format="json").status_code == 403


def test_the_database_refuses_it_too():
    Actuator.objects.create(**BOILER)
    with pytest.raises(IntegrityError), transaction.atomic():
        Actuator.objects.create(**{**BOILER, "name": "Twin", "host": "10.0.0.7 "})


def test_the_admin_shows_a_form_error_on_the_coil(superuser):
    Actuator.objects.create(**BOILER)
    c = Client()
    c.force_login(superuser)
    response = c.post(
        "/admin/sensors/actuator/add/",
        {**BOILER, "name": "Twin", "driver": "modbus_coil", "min_on_s": 600, "min_off_s": 600,
         "enabled": "on", "commands-TOTAL_FORMS": 0, "commands-INITIAL_FORMS": 0},
    )  # fmt: skip
    assert response.status_code == 200
    body = response.content.decode()
    assert "is already driven by actuator" in body and "errorlist" in body
    assert Actuator.objects.count() == 1


def _valve(name: str, coil: int, kind: str = "valve") -> Actuator:
    return Actuator.objects.create(name=name, kind=kind, host="10.0.0.7", coil=coil)


def test_a_valve_belongs_to_one_zone_a_pump_may_be_shared(engineer_api):
    valve, pump = _valve("Hall valve", 1), _valve("Circuit pump", 2, "pump")
    Zone.objects.create(name="Hall", slug="hall").actuators.set([valve, pump])
    body = {"name": "Annex", "slug": "annex", "actuators": [valve.pk]}
    response = engineer_api.post("/api/v1/zones", body, format="json")
    assert response.status_code == 400
    assert (
        "Valve 'Hall valve' already belongs to zone 'Hall'"
        in response.json()["fields"]["actuators"][0]
    )
    body["actuators"] = [pump.pk]
    assert engineer_api.post("/api/v1/zones", body, format="json").status_code == 201


def test_a_plant_actuator_cannot_be_a_zones_too(engineer_api, superuser):
    boiler, valve = _valve("Boiler", 3, "boiler"), _valve("Hall valve", 1)
    HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
    response = engineer_api.post(
        "/api/v1/zones", {"name": "Hall", "slug": "hall", "actuators": [boiler.pk]}, format="json"
    )
    assert response.status_code == 400
    assert (
        "already the boiler of heating plant 'Boiler house'"
        in response.json()["fields"]["actuators"][0]
    )
    # The admin form says the same about a zone; the plant's own form about its pump.
    Zone.objects.create(name="Hall", slug="hall").actuators.set([valve])
    c = Client()
    c.force_login(superuser)
    response = c.post(
        "/admin/control/heatingplant/add/",
        {"name": "Second", "boiler": _valve("Boiler 2", 4, "boiler").pk, "pump": valve.pk,
         "pump_overrun_s": 360, "pump_kick_idle_days": 7, "pump_kick_s": 30,
         "frost_outside_c": 1.5, "enabled": "on"},
    )  # fmt: skip
    assert response.status_code == 200
    assert "already driven by zone &#x27;Hall&#x27;" in response.content.decode()
    assert HeatingPlant.objects.count() == 1


def test_a_solar_pump_cannot_be_claimed_twice():
    pump = _valve("Solar pump", 5, "pump")
    HeatingPlant.objects.create(
        name="Boiler house", boiler=_valve("Boiler", 3, "boiler"), pump=pump
    )
    circuit = SolarCircuit(
        name="Roof",
        collector_sensor=f.temperature_sensor("collector"),
        tank_sensor=f.temperature_sensor("tank"),
        pump=pump,
    )
    with pytest.raises(Exception, match="already the pump of heating plant 'Boiler house'"):
        circuit.full_clean()


@pytest.fixture
def racer(monkeypatch):
    """Another request's actuator lands on the coil between our validation and our save: the
    real insert and the real database constraint, at the moment two requests race."""
    from sensors.serializers import ActuatorSerializer

    validate = ActuatorSerializer.validate
    inserted = []

    def validate_then_race(self, attrs):
        attrs = validate(self, attrs)
        inserted.append(Actuator.objects.create(**{**BOILER, "name": "Boiler (other request)"}))
        return attrs

    monkeypatch.setattr(ActuatorSerializer, "validate", validate_then_race)
    return inserted


def test_a_create_racing_another_on_one_coil_is_a_400_on_coil_not_a_500(engineer_api, racer):
    """The loser of the race hit the unique constraint: IntegrityError, 500."""
    response = engineer_api.post("/api/v1/actuators", BOILER, format="json")
    assert response.status_code == 400
    [message] = response.json()["fields"]["coil"]
    assert "already driven by actuator 'Boiler (other request)'" in message
    assert list(Actuator.objects.values_list("name", flat=True)) == ["Boiler (other request)"]


def test_enabling_a_spare_racing_another_is_a_400_on_coil(engineer_api, racer):
    spare = Actuator.objects.create(**{**BOILER, "name": "Spare", "enabled": False})
    response = engineer_api.patch(f"/api/v1/actuators/{spare.pk}", {"enabled": True}, format="json")
    assert response.status_code == 400 and "coil" in response.json()["fields"]
    spare.refresh_from_db()
    assert spare.enabled is False
