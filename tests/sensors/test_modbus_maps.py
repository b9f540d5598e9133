"""Modbus register maps: validated when saved (API, admin, command), and the maps shipped as data."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from sensors.devices.modbus_maps import (
    MAX_ROWS,
    RegisterMapError,
    shipped_maps,
    validate_register_map,
)
from sensors.models import ModbusBus, ModbusRegister, Node


@pytest.fixture
def meter(db) -> Node:
    node = Node(name="plant-meter", protocol="modbus", modbus_host="10.0.0.5")
    node.set_new_key()
    node.save()
    return node


def _post_map(api, node, body):
    return api.post(f"/api/v1/nodes/{node.pk}/register-map", body, format="json")


def test_shipped_maps_load_and_hold_the_manufacturers_addresses():
    maps = shipped_maps()
    assert {"eastron-sdm630", "eastron-sdm120", "itron-cf-echo-ii"} <= set(maps)
    sdm630 = {r["key"]: r for r in maps["eastron-sdm630"]["registers"]}
    assert (sdm630["voltage_l1"]["address"], sdm630["power"]["address"]) == (0, 52)
    assert (sdm630["import_kwh"]["address"], sdm630["total_kwh"]["address"]) == (72, 342)
    sdm120 = {r["key"]: r for r in maps["eastron-sdm120"]["registers"]}
    assert (sdm120["current"]["address"], sdm120["frequency"]["address"]) == (6, 70)
    heat = {r["key"]: r for r in maps["itron-cf-echo-ii"]["registers"]}
    assert heat["heat_kwh"]["function"] == "holding" and heat["flow_temperature"]["scale"] == 0.1
    assert maps["itron-cf-echo-ii"]["max_block"] == 22


def test_a_template_makes_the_meters_registers_and_inputs(engineer_api, meter):
    answer = _post_map(engineer_api, meter, {"template": "eastron-sdm630"})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"registers": 15, "modbus_max_block": 80}
    assert meter.registers.get(key="import_kwh").address == 72
    assert meter.sensors.get(key="import_kwh").unit == "kWh"
    # Applying another replaces the map; inputs already there are kept.
    assert _post_map(engineer_api, meter, {"template": "eastron-sdm120"}).status_code == 200
    assert meter.registers.count() == 10


BAD_ROWS = [
    ({"key": "a", "address": 65535, "data_type": "float32"}, "address"),
    ({"key": "a", "address": 65536, "data_type": "uint16"}, "address"),
    ({"key": "a", "address": -1}, "address"),
    ({"key": "a", "address": 1, "data_type": "float64", "count": 2}, "count"),
    ({"key": "a", "address": 1, "word_order": "big"}, "word_order"),
    ({"key": "a", "address": 1, "data_type": "int128"}, "data_type"),
    ({"key": "a", "address": 1, "function": "coil"}, "function"),
    ({"key": "a", "address": 1, "scale": "x"}, "scale"),
    ({"key": "a", "address": 1, "adress": 2}, "adress"),
    ({"key": "", "address": 1}, "key"),
    ({"key": "a/../b", "address": 1}, "key"),
]


@pytest.mark.parametrize(("row", "field"), BAD_ROWS)
def test_a_bad_row_is_a_400_naming_its_field_and_row(engineer_api, meter, row, field):
    ModbusRegister.objects.create(node=meter, key="kept", address=0)
    rows = [{"key": "ok", "address": 100}, row]
    answer = _post_map(engineer_api, meter, {"registers": rows})
    assert answer.status_code == 400
    assert answer.json()["field"] == field and answer.json()["row"] == 1
    assert answer.json()["error"].startswith(f"row 1: {field}: ")
    assert list(meter.registers.values_list("key", flat=True)) == ["kept"]  # nothing changed


def test_duplicate_names_and_an_oversized_map_are_refused(engineer_api, meter):
    twice = [{"key": "p", "address": 0}, {"key": "p", "address": 2}]
    answer = _post_map(engineer_api, meter, {"registers": twice})
    assert (answer.status_code, answer.json()["field"], answer.json()["row"]) == (400, "key", 1)
    at_bound = [{"key": f"r{i}", "address": i, "data_type": "uint16"} for i in range(MAX_ROWS)]
    assert _post_map(engineer_api, meter, {"registers": at_bound}).status_code == 200
    over = at_bound + [{"key": "one-more", "address": 999, "data_type": "uint16"}]
    answer = _post_map(engineer_api, meter, {"registers": over})
    assert (answer.status_code, answer.json()["field"]) == (400, "registers")


def test_unknown_template_and_bad_block_size_are_refused(engineer_api, meter):
    answer = _post_map(engineer_api, meter, {"template": "sdm999"})
    assert (answer.status_code, answer.json()["field"]) == (400, "template")
    answer = _post_map(engineer_api, meter, {"registers": [{"key": "a", "address": 0}],
                                             "max_block": 126})  # fmt: skip
    assert (answer.status_code, answer.json()["field"]) == (400, "max_block")
    assert _post_map(engineer_api, meter, {"registers": "nope"}).status_code == 400


def test_register_crud_checks_range_order_and_names(engineer_api, meter):
    def post(**fields):
        return engineer_api.post(
            "/api/v1/modbus-registers", {"node": meter.pk, "key": "k", "address": 0, **fields},
            format="json",
        )  # fmt: skip

    assert post(address=65535, data_type="float32").json()["fields"].keys() == {"address"}
    assert post(address=65532, data_type="float64", key="last").status_code == 201
    assert post(word_order="big").json()["fields"].keys() == {"word_order"}
    answer = post(data_type="uint64", word_order="DCBA", offset=-40.0)
    assert answer.status_code == 201, answer.content
    duplicate = post()
    assert (duplicate.status_code, list(duplicate.json()["fields"])) == (400, ["key"])


def test_buses_and_rtu_meters_are_checked(engineer_api, db):
    bad = engineer_api.post("/api/v1/modbus-buses", {"name": "b", "port": "/dev/../etc/passwd"})
    assert (bad.status_code, list(bad.json()["fields"])) == (400, ["port"])
    bad = engineer_api.post("/api/v1/modbus-buses", {"name": "b", "port": "/dev/ttyUSB0",
                                                     "timeout": 60})  # fmt: skip
    assert (bad.status_code, list(bad.json()["fields"])) == (400, ["timeout"])
    bus = engineer_api.post("/api/v1/modbus-buses", {"name": "b", "port": "/dev/ttyUSB0",
                                                     "baudrate": 2400, "parity": "E"})  # fmt: skip
    assert bus.status_code == 201, bus.content

    def node(name, **fields):
        return engineer_api.post("/api/v1/nodes", {"name": name, "protocol": "modbus", **fields})

    assert node("m1", modbus_bus=bus.json()["id"], modbus_device_id=7).status_code == 201
    clash = node("m2", modbus_bus=bus.json()["id"], modbus_device_id=7)
    assert (clash.status_code, list(clash.json()["fields"])) == (400, ["modbus_device_id"])
    both = node("m3", modbus_bus=bus.json()["id"], modbus_host="10.0.0.9")
    assert (both.status_code, list(both.json()["fields"])) == (400, ["modbus_bus"])
    assert node("m4").json()["fields"].keys() == {"modbus_host"}
    assert node("m5", modbus_host="10.0.0.9", modbus_max_block=126).json()["fields"].keys() == {
        "modbus_max_block"
    }


def test_the_shipped_maps_are_listed_for_staff(viewer_api, db):
    answer = viewer_api.get("/api/v1/modbus-register-maps")
    assert answer.status_code == 200
    assert "eastron-sdm120" in [m["name"] for m in answer.json()]


def test_the_admin_creates_a_meter_from_a_template(superuser, db):
    client = Client()
    client.force_login(superuser)
    form = {
        "name": "admin-sdm120", "protocol": "modbus", "interval": 10, "enabled": "on",
        "modbus_host": "10.0.0.7", "modbus_port": 502, "modbus_device_id": 2,
        "modbus_max_block": 120, "register_map_template": "eastron-sdm120",
        "sensors-TOTAL_FORMS": 0, "sensors-INITIAL_FORMS": 0,
        "registers-TOTAL_FORMS": 0, "registers-INITIAL_FORMS": 0,
    }  # fmt: skip
    answer = client.post("/admin/sensors/node/add/", form)
    assert answer.status_code == 302, answer.content.decode()[:3000]
    node = Node.objects.get(name="admin-sdm120")
    assert node.registers.count() == 10 and node.modbus_max_block == 80


def test_the_admin_refuses_a_register_past_the_last_address(superuser, meter):
    client = Client()
    client.force_login(superuser)
    form = {
        "name": meter.name, "protocol": "modbus", "interval": 10, "enabled": "on",
        "modbus_host": "10.0.0.5", "modbus_port": 502, "modbus_device_id": 1,
        "modbus_max_block": 120,
        "sensors-TOTAL_FORMS": 0, "sensors-INITIAL_FORMS": 0,
        "registers-TOTAL_FORMS": 1, "registers-INITIAL_FORMS": 0,
        "registers-0-key": "far", "registers-0-address": 65535, "registers-0-function": "input",
        "registers-0-data_type": "float64", "registers-0-word_order": "ABCD",
        "registers-0-scale": 1, "registers-0-offset": 0,
    }  # fmt: skip
    answer = client.post(f"/admin/sensors/node/{meter.pk}/change/", form)
    assert answer.status_code == 200  # the form again, with the error
    assert "passes the last one, 65535" in answer.content.decode()
    assert not meter.registers.exists()


def test_the_command_creates_meters_from_maps_and_names_bad_rows(db, tmp_path, capsys):
    ModbusBus.objects.create(name="plant", port="/dev/ttyUSB0", baudrate=2400)
    call_command("modbus_meter", "heat1", "--bus", "plant", "--unit", "3",
                 "--map", "itron-cf-echo-ii")  # fmt: skip
    node = Node.objects.get(name="heat1")
    assert (node.modbus_bus.name, node.modbus_device_id, node.registers.count()) == ("plant", 3, 8)
    assert node.modbus_max_block == 22
    call_command("modbus_meter", "--list-maps")
    assert "eastron-sdm630" in capsys.readouterr().out

    bad = tmp_path / "map.json"
    bad.write_text(json.dumps({"registers": [{"key": "a", "address": 0},
                                             {"key": "b", "address": 2, "count": 4}]}))  # fmt: skip
    with pytest.raises(CommandError, match="row 1: count"):
        call_command("modbus_meter", "tcp1", "--host", "10.0.0.8", "--map-file", str(bad))
    assert not Node.objects.filter(name="tcp1").exists()  # nothing half-made
    with pytest.raises(CommandError, match="modbus_device_id"):
        call_command("modbus_meter", "heat2", "--bus", "plant", "--unit", "3")


def test_validation_names_the_row():
    with pytest.raises(RegisterMapError) as error:
        validate_register_map([{"key": "a", "address": 0}, {"key": "b", "address": 70000}])
    assert (error.value.field, error.value.row) == ("address", 1)


def test_a_bus_timeout_of_nan_is_refused(db):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as error:
        ModbusBus(name="n", port="/dev/ttyUSB0", timeout=float("nan")).full_clean()
    assert "timeout" in error.value.message_dict
