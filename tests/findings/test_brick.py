"""The site as a Brick model: every thing classed by what the model says, the Turtle valid by
brickschema's own shapes, downloadable by staff and from the command line (docs/BRICK.md)."""

from __future__ import annotations

from datetime import date

import pytest
from rdflib import OWL, RDF, Graph, Namespace
from rdflib.namespace import SH

BRICK = Namespace("https://brickschema.org/schema/Brick#")
BRICK_VERSION = "1.3"  # findings/brick.py writes Brick 1.3 classes


@pytest.fixture(scope="module")
def ontology():
    import brickschema

    return brickschema.Graph(load_brick=True, brick_version=BRICK_VERSION)


@pytest.fixture
def demo(db, redis_client, tmp_path):
    from demo.energy import ensure_tree
    from demo.site import ensure_demo_site

    site = ensure_demo_site(tmp_path / "keys.json")
    ensure_tree(site.site, date(2030, 1, 7))
    return site


def problems(ttl: str) -> list[str]:
    """brickschema's violations and warnings about our entities. The bundled ontology's own
    (QUDT quantity kinds it does not ship) are not ours; Brick 1.4+ deprecating its location
    classes for REC's is a warning a 1.3 model is meant to carry."""
    import brickschema

    g = brickschema.Graph(load_brick=True, brick_version=BRICK_VERSION)
    g.parse(data=ttl, format="turtle")
    _, results, _ = g.validate()
    found = []
    for r in results.subjects(RDF.type, SH.ValidationResult):
        focus, message = (
            str(results.value(r, SH.focusNode)),
            str(results.value(r, SH.resultMessage)),
        )
        if focus.startswith("urn:bms:") and "deprecated in version 1.4" not in message:
            found.append(f"{focus}: {message}")
    return found


def typed(ttl: str) -> dict[str, str]:
    g = Graph().parse(data=ttl, format="turtle")
    return {
        str(s).removeprefix("urn:bms:"): str(o).removeprefix(str(BRICK))
        for s, o in g.subject_objects(RDF.type)
        if str(s).startswith("urn:bms:")
    }


def test_the_demo_site_exports_a_model_brickschema_validates(demo):
    from findings import brick

    ttl = brick.export(demo.site)
    assert problems(ttl) == []


def test_every_site_building_zone_plant_meter_sensor_and_actuator_has_a_class(demo):
    from control.models import HeatingPlant, Zone
    from energy.models import Meter, MeterNode
    from findings import brick
    from sensors.models import Actuator, Sensor

    classes = typed(brick.export(demo.site))
    site = demo.site
    assert classes[f"site-{site.pk}"] == "Site"
    for node in MeterNode.objects.filter(site=site, kind="building"):
        assert classes[f"place-{node.pk}"] == "Building"
    for zone in Zone.objects.filter(site=site):
        assert classes[f"zone-{zone.pk}"] == "HVAC_Zone"
        assert classes[f"sensor-{zone.temperature_sensor_id}"] == "Zone_Air_Temperature_Sensor"
        for valve in zone.actuators.all():
            assert classes[f"actuator-{valve.pk}"] == "Heating_Valve"
            assert classes[f"command-{valve.pk}"] == "On_Off_Command"
    for plant in HeatingPlant.objects.filter(site=site):
        assert classes[f"plant-{plant.pk}"] == "Hot_Water_System"
        assert classes[f"actuator-{plant.boiler_id}"] == "Boiler"
    for meter in Meter.objects.filter(node__site=site):
        assert classes[f"meter-{meter.pk}"].endswith("Meter")
    for sensor in Sensor.objects.filter(node__site=site):
        assert f"sensor-{sensor.pk}" in classes
    for actuator in Actuator.objects.filter(site=site):
        assert f"actuator-{actuator.pk}" in classes


def test_every_class_it_can_write_is_in_brick(ontology):
    from findings import brick
    from sensors import brick as kinds

    names = (
        set(kinds.SENSOR_BY_KIND.values()) | set(kinds.ACTUATOR_BY_KIND.values())
        | set(kinds.SENSOR_CHOICES) | set(kinds.ACTUATOR_CHOICES)
        | set(brick.LOCATION_BY_KIND.values()) | set(brick.METER_BY_FUEL.values())
        | set(brick.BUILDING_METER_BY_FUEL.values()) | set(brick.METER_POINT.values())
        | set(brick.GENERATOR_BY_KIND.values())
        | {brick.ZONE_AIR, brick.SUPPLY_WATER, brick.OUTSIDE_AIR, brick.WATER, brick.CONTACT,
           brick.RETURN_WATER, brick.COLLECTOR, brick.ZONE_VALVE, brick.GENERATION,
           brick.WATER_FLOW, brick.COMMAND, "Site", "HVAC_Zone", "Hot_Water_System", "Hot_Water_Pump",
           "Solar_Thermal_Collector", "Hot_Water_Storage_Tank"}
    )  # fmt: skip
    missing = [n for n in sorted(names) if (BRICK[n], RDF.type, OWL.Class) not in ontology]
    assert missing == []


def test_a_class_chosen_by_hand_wins_and_a_generic_sensor_keeps_its_kinds(demo):
    from findings import brick
    from sensors.models import Node, Sensor

    node = Node.objects.filter(site=demo.site).first()
    counter = Sensor.objects.create(node=node, key="gas_pulses", kind="pulse")
    chosen = Sensor.objects.create(
        node=node, key="irr", kind="generic", brick_class="Solar_Irradiance_Sensor"
    )
    classes = typed(brick.export(demo.site))
    assert classes[f"sensor-{counter.pk}"] == "Sensor"
    assert classes[f"sensor-{chosen.pk}"] == "Solar_Irradiance_Sensor"


def test_a_point_in_a_feed_names_its_feed(demo):
    from findings import brick

    g = brick.site_graph(demo.site)
    zone = demo.zones[next(iter(demo.zones))]
    refs = [
        str(g.value(ref, brick.REF.hasTimeseriesId))
        for ref in g.objects(brick.BMS[f"sensor-{zone.temperature_sensor_id}"],
                             brick.REF.hasExternalReference)
    ]  # fmt: skip
    assert refs == [f"feed:{zone.temperature_sensor.feed_id}"]


def test_a_hand_chosen_class_outside_the_list_is_refused(db):
    from django.core.exceptions import ValidationError

    from sensors.models import Node, Sensor

    node = Node(name="n")
    node.set_new_key()
    node.save()
    sensor = Sensor(node=node, key="x", brick_class="Not_A_Brick_Class")
    with pytest.raises(ValidationError) as caught:
        sensor.full_clean()
    assert "brick_class" in caught.value.message_dict


def test_export_brick_writes_the_site_to_a_file(demo, tmp_path):
    from django.core.management import call_command

    out = tmp_path / "site.ttl"
    call_command("export_brick", "--site", demo.site.slug, "-o", str(out))
    classes = typed(out.read_text())
    assert classes[f"site-{demo.site.pk}"] == "Site"


def test_export_brick_names_an_unknown_site(db):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no-such-site"):
        call_command("export_brick", "--site", "no-such-site")


@pytest.mark.parametrize("where", ["missing/site.ttl", "."])
def test_export_brick_names_an_output_it_cannot_write(db, tmp_path, where):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--output"):  # a message, not a traceback
        call_command("export_brick", "-o", str(tmp_path / where))


def test_staff_download_the_model_as_turtle(demo, client):
    from django.contrib.auth.models import User

    user = User.objects.create_user("v", password="pw-long-enough-1")
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get_or_create(name="viewers")[0])
    client.force_login(user)
    response = client.get(f"/api/v1/brick.ttl?site={demo.site.slug}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/turtle")
    assert f"{demo.site.slug}.ttl" in response["Content-Disposition"]
    assert typed(response.content.decode())[f"site-{demo.site.pk}"] == "Site"


@pytest.mark.parametrize("site", ["", "x" * 101, "no-such-site", "a\x00b"])
def test_a_bad_site_is_a_400_naming_the_field(db, client, site):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("s", password="pw-long-enough-1"))
    response = client.get("/api/v1/brick.ttl", {"site": site})
    assert response.status_code == 400
    assert response.json()["error"].startswith("site: ")
