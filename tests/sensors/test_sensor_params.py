"""Sensor params are checked against the sensor's kind when saved (model, API, admin), so a
typo or a bad number is a 400 naming the key, never readings lost later at ingest."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from sensors.models import Node, Sensor
from sensors.sensor_params import MAX_PARAMS, param_errors

pytestmark = pytest.mark.django_db


@pytest.fixture
def node(db):
    node = Node(name="emontx1")
    node.set_new_key()
    node.save()
    return node


@pytest.mark.parametrize(
    ("kind", "params", "key", "words"),
    [
        ("rtd_pt100", {"r0": "abc"}, "r0", "must be a number, got 'abc'"),
        ("rtd_pt100", {"rzero": 100}, "rzero", "not a parameter of kind rtd_pt100"),
        ("rtd_pt1000", {"r0": 0}, "r0", "greater than 0"),
        ("pulse", {"pulses_per_unit": 0}, "pulses_per_unit", "greater than 0"),
        ("pulse", {"counter_bits": 16.5}, "counter_bits", "whole number"),
        ("pulse", {"counter_bits": 65}, "counter_bits", "at most 64"),
        ("pulse", {"output": "speed"}, "output", "one of total, rate"),
        ("ntc_steinhart", {}, "a", "required for kind ntc_steinhart"),
        ("ntc_steinhart", {"a": 1e-3, "b": 2e-4}, "c", "required"),
        ("ntc_beta", {"beta": True}, "beta", "must be a number, got True"),
        ("ntc_beta", {"t0": -300}, "t0", "greater than -273.15"),
        ("power", {"input": "amps"}, "input", "one of watts, irms, burden_volts"),
        ("power", {"power_factor": 1.5}, "power_factor", "at most 1"),
        ("thermocouple_k", {"cold_junction": float("nan")}, "cold_junction", "finite"),
        ("temperature", {"r0": 100}, "r0", "known: none"),
    ],
)
def test_bad_params_are_refused_naming_the_key(node, kind, params, key, words):
    sensor = Sensor(node=node, key="x", kind=kind, params=params)
    with pytest.raises(ValidationError) as err:
        sensor.full_clean()
    messages = err.value.message_dict["params"]
    assert any(m.startswith(f"{key}: ") and words in m for m in messages), messages


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("rtd_pt100", {}),
        ("rtd_pt100", {"r0": 100.2}),
        ("ntc_beta", {"r25": 10000, "beta": 3950, "t0": 25}),
        ("ntc_steinhart", {"a": 1.129e-3, "b": 2.341e-4, "c": 8.775e-8}),
        ("pulse", {"pulses_per_unit": 1.4908, "counter_bits": 16, "output": "rate"}),
        ("power", {"input": "irms", "voltage": 240, "power_factor": 0.95}),
        ("thermocouple_k", {"cold_junction": 21.5}),
        ("generic", {}),
    ],
)
def test_good_params_are_accepted(node, kind, params):
    Sensor(node=node, key="x", kind=kind, params=params).full_clean()


def test_the_number_of_keys_is_bounded():
    params = {f"k{i}": 1 for i in range(MAX_PARAMS + 1)}
    assert param_errors("generic", params) == [f"at most {MAX_PARAMS} keys"]
    assert param_errors("generic", {f"k{i}": 1 for i in range(MAX_PARAMS)})  # unknown, not count


def test_api_answers_400_naming_the_field(engineer_api, node):
    body = {"node": node.pk, "key": "t1", "kind": "rtd_pt100", "params": {"r0": "abc"}}
    response = engineer_api.post("/api/v1/sensors/", body, format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["params"] == ["r0: must be a number, got 'abc'"]
    body["params"] = {"r0": 100}
    assert engineer_api.post("/api/v1/sensors/", body, format="json").status_code == 201


def test_api_rechecks_params_when_only_the_kind_changes(engineer_api, node):
    sensor = Sensor.objects.create(node=node, key="p", kind="pulse", params={"counter_bits": 16})
    response = engineer_api.patch(f"/api/v1/sensors/{sensor.pk}/", {"kind": "rtd_pt100"},
                                  format="json")  # fmt: skip
    assert response.status_code == 400
    assert (
        "counter_bits: not a parameter of kind rtd_pt100" in response.json()["fields"]["params"][0]
    )


def test_admin_shows_the_error_on_the_params_field(engineer, node):
    client = Client()
    client.force_login(engineer)
    response = client.post(
        "/admin/sensors/sensor/add/",
        {"node": node.pk, "key": "gas", "name": "", "kind": "pulse", "unit": "", "scale": 1,
         "offset": 0, "params": '{"pulses_per_unit": 0}', "processes": "[]"},
    )  # fmt: skip
    assert response.status_code == 200  # the form again, not a redirect
    errors = response.context["adminform"].form.errors
    assert errors["params"] == ["pulses_per_unit: must be greater than 0, got 0"]
    assert not Sensor.objects.filter(key="gas").exists()


def test_a_pulse_counter_takes_its_glitch_rate_and_refuses_a_zero_one():
    from sensors.sensor_params import param_errors

    assert param_errors("pulse", {"pulses_per_unit": 800, "max_pulse_rate": 50}) == []
    errors = param_errors("pulse", {"max_pulse_rate": 0})
    assert errors and "max_pulse_rate" in errors[0]
