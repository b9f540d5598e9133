"""`manage.py simulate_site --setup-only`: creates the demo site once, keeps its keys."""

import json
import os
import stat
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from control.models import Booking, HeatingPlant, Schedule, SchedulePeriod, SolarCircuit, Zone
from demo import layout
from displays.models import Display, Panel
from feeds.models import Feed
from sensors.models import Actuator, ModbusRegister, Node, Sensor, Site

MODELS = [Site, Node, Sensor, ModbusRegister, Feed, Actuator, Schedule, SchedulePeriod, Zone,
          Booking, Display, Panel, HeatingPlant, SolarCircuit]  # fmt: skip


@pytest.fixture
def key_file(tmp_path, settings) -> Path:
    settings.BMS_DATA_DIR = tmp_path
    return tmp_path / "demo" / "keys.json"


def _setup(*args: str) -> str:
    """Set up without history (tests/demo/test_history.py covers that)."""
    out = StringIO()
    call_command("simulate_site", "--setup-only", "--history-days", "0", *args, stdout=out)
    return out.getvalue()


def _counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


@pytest.mark.django_db
def test_setup_only_is_idempotent(key_file):
    first = _setup()
    counts = _counts()
    keys = json.loads(key_file.read_text())
    second = _setup()
    assert _counts() == counts
    assert json.loads(key_file.read_text()) == keys  # the same keys are kept
    assert "created" in first and "nothing to create" in second


@pytest.mark.django_db
def test_setup_creates_the_cat_like_site(key_file):
    _setup()
    site = Site.objects.get(slug=layout.SITE_SLUG)
    assert (site.latitude, site.longitude, site.time_zone) == (52.62, -3.84, "Europe/London")
    # The layout's nodes and the legacy BACnet boiler controller (demo/bacnet_setup.py).
    assert Node.objects.filter(site=site).count() == len(layout.ALL_NODES) + 1
    assert (
        Node.objects.get(site=site, protocol=Node.Protocol.BACNET).name == "old-boiler-controller"
    )
    assert Zone.objects.filter(site=site, bookable=True).count() == 4
    for zone in Zone.objects.all():
        assert zone.temperature_sensor is not None
        assert [a.kind for a in zone.actuators.all()] == [Actuator.Kind.RADIATOR]
    kinds = set(Actuator.objects.filter(site=site).values_list("kind", flat=True))
    assert kinds == {"boiler", "pump", "radiator"}
    coils = list(Actuator.objects.values_list("coil", flat=True))
    assert len(coils) == len(set(coils)) == 11  # one relay coil each (4 for the heat main)
    assert Booking.objects.filter(booked_by=layout.BOOKED_BY).count() == len(layout.BOOKINGS)
    assert Schedule.objects.count() == 2
    assert set(Display.objects.values_list("slug", flat=True)) == {
        "pv",
        "thermal",
        "hydro",
        "energy",
        "site",
    }
    plant = HeatingPlant.objects.get()
    assert (plant.boiler.coil, plant.pump.coil) == (layout.COIL_BOILER, layout.COIL_HEATING_PUMP)
    assert set(plant.zones.all()) == set(Zone.objects.all())
    solar = SolarCircuit.objects.get()
    assert solar.pump.coil == layout.COIL_SOLAR_PUMP
    assert (solar.collector_sensor.key, solar.tank_sensor.key) == ("collector", "tank")


@pytest.mark.django_db
def test_the_pv_array_and_hydro_turbine_are_generation_meters_the_findings_rules_judge(key_file):
    from energy.models import HYDRO, PV, Meter

    _setup()
    _setup()  # once only
    pv = Meter.objects.get(name="PV array")
    hydro = Meter.objects.get(name="Hydro turbine")
    assert (pv.fuel, pv.source, pv.generator, pv.flow_feed) == ("generation", "power", PV, None)
    assert pv.feed == Feed.objects.get(tag="emontx-pv", name="PV power")
    assert (hydro.generator, hydro.feed.name) == (HYDRO, "Hydro power")
    assert hydro.flow_feed == Feed.objects.get(name="River flow")
    pv.full_clean()
    hydro.full_clean()


@pytest.mark.django_db
def test_pv_power_is_logged_and_integrated_to_kwh(key_file):
    _setup()
    sensor = Sensor.objects.get(node__name="emontx-pv", key="power")
    kwh = Feed.objects.get(tag="emontx-pv", name="PV energy")
    assert sensor.processes == [
        {"process": "log_to_feed", "feed": sensor.feed_id},
        {"process": "power_to_kwh", "feed": kwh.pk},
    ]
    # The kiosk feeds are public once the displays exist.
    assert Feed.objects.get(pk=sensor.feed_id).public


@pytest.mark.django_db
def test_keys_file_is_private_and_every_key_opens_its_node(key_file):
    _setup()
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    keys = json.loads(key_file.read_text())
    assert set(keys) == {spec.name for spec in layout.ALL_NODES}
    for name, key in keys.items():
        assert Node.for_key(key).name == name
    # Only hashes are in the database.
    assert not Node.objects.filter(key_hash__in=list(keys.values())).exists()


@pytest.mark.django_db
def test_a_lost_keys_file_gets_new_keys_and_the_old_ones_stop_working(key_file):
    _setup()
    old = json.loads(key_file.read_text())
    key_file.unlink()
    _setup()
    new = json.loads(key_file.read_text())
    assert set(new) == set(old)
    for name in old:
        assert old[name] != new[name]
        assert Node.for_key(old[name]) is None
        assert Node.for_key(new[name]).name == name


@pytest.mark.django_db
def test_actuators_and_meter_point_at_the_ports_given(key_file):
    _setup("--relay-port", "16020", "--meter-port", "16021")
    _setup("--relay-port", "17020", "--meter-port", "17021")
    assert set(Actuator.objects.values_list("host", "port")) == {("127.0.0.1", 17020)}
    meter = Node.objects.get(name=layout.METER_NODE.name)
    assert (meter.modbus_host, meter.modbus_port) == ("127.0.0.1", 17021)
    assert ModbusRegister.objects.filter(node=meter).count() == len(layout.METER_REGISTERS)


@pytest.mark.django_db
def test_an_engineers_edits_to_demo_objects_are_kept(key_file):
    _setup()
    Zone.objects.filter(slug="workshop").update(comfort_setpoint=18.5)
    Sensor.objects.filter(node__name="emontx-pv", key="power").update(name="Array A")
    _setup()
    assert Zone.objects.get(slug="workshop").comfort_setpoint == 18.5
    assert Sensor.objects.get(node__name="emontx-pv", key="power").name == "Array A"


@pytest.mark.django_db
def test_setup_prints_the_urls_to_open(key_file):
    out = _setup("--base-url", "http://bms.example:8080/")
    for path in ("/staff/", "/admin/", "/kiosk/pv/", "/kiosk/thermal/", "/kiosk/hydro/"):
        assert f"http://bms.example:8080{path}" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--speed", "0"], "--speed"),
        (["--duration", "-1"], "--duration"),
        (["--relay-port", "70000"], "--relay-port"),
        (["--relay-port", "15030", "--meter-port", "15030"], "different ports"),
        (["--base-url", "ftp://x"], "--base-url"),
        (["--history-days", "61"], "--history-days"),
    ],
)
@pytest.mark.django_db
def test_bad_options_are_refused_clearly(key_file, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("simulate_site", "--setup-only", *args, stdout=StringIO())
    assert not Site.objects.exists()  # refused before creating anything


def test_help_documents_every_option():
    from django.core.management import load_command_class

    command = load_command_class("demo", "simulate_site")
    out = StringIO()
    command.create_parser("manage.py", "simulate_site").print_help(out)
    text = out.getvalue()
    for option in ("--base-url", "--speed", "--relay-port", "--meter-port", "--setup-only",
                   "--duration", "--no-gateway", "--seed", "--history-days"):  # fmt: skip
        assert option in text
    assert "wall-clock" in text  # --speed says what it speeds up and what it does not


@pytest.mark.django_db
def test_gateway_config_is_valid_for_bms_gateway_and_private(key_file, tmp_path):
    from demo.keystore import gateway_config, write_private_json
    from sensors.devices.gateways.config import load_config

    _setup()
    keys = json.loads(key_file.read_text())
    path = tmp_path / "gateway.json"
    write_private_json(path, gateway_config("http://127.0.0.1:8000", keys))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    config = load_config(path)  # the gateway's own validation
    boiler = config.jeelib[10]
    assert (boiler.node, boiler.key) == ("boilerhouse", keys["boilerhouse"])
    assert (boiler.names, boiler.scales, boiler.datacodes) == (
        ["flow", "outside", "heating"],
        [0.01, 0.01, 0.01],
        "h",
    )
    assert config.jeelib[11].datacodes == "H"
    for radio in config.jeelib.values():  # every name the gateway posts has a sensor
        assert Sensor.objects.filter(node__name=radio.node, key__in=radio.names).count() == len(
            radio.names
        )
