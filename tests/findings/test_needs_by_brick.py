"""Rules find their points by Brick class (findings/needs.py, findings/site_model.py): in a Brick
model written by another tool with other (sub)classes, and on our own site whatever an engineer
classed a point as by hand."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from rdflib import RDF, Graph, Namespace

from findings import needs as n
from findings import rules
from findings.site_model import (
    SUBCLASSES_FILE,
    Entity,
    SiteModel,
    derive,
    named_classes,
    subclasses,
)

from .conftest import MONDAY, WEEK, command

BRICK = Namespace("https://brickschema.org/schema/Brick#")
BMS = Namespace("urn:bms:")
H = timedelta(hours=1)


def _graph(*triples) -> Graph:
    g = Graph()
    for s, p, o in triples:
        g.add((BMS[s], RDF.type if p == "a" else BRICK[p], BRICK[o] if p == "a" else BMS[o]))
    return g


def test_a_need_matches_the_subclasses_another_tool_wrote():
    """Another site's model: its room sensor a Zone_Air_Temperature_Sensor, its valve a
    Hot_Water_Valve and a Fan feeding the room besides, a Natural_Gas_Boiler feeding it too."""
    g = _graph(
        ("zone-1", "a", "HVAC_Zone"),
        ("sensor-5", "a", "Zone_Air_Temperature_Sensor"),
        ("sensor-5", "isPointOf", "zone-1"),
        ("actuator-7", "a", "Hot_Water_Valve"),
        ("actuator-7", "feeds", "zone-1"),
        ("command-7", "a", "On_Off_Command"),
        ("actuator-7", "hasPoint", "command-7"),
        ("actuator-8", "a", "Fan"),
        ("actuator-8", "feeds", "zone-1"),
        ("command-8", "a", "On_Off_Command"),
        ("actuator-8", "hasPoint", "command-8"),
        ("actuator-9", "a", "Natural_Gas_Boiler"),
        ("actuator-9", "feeds", "zone-1"),
        ("command-9", "a", "On_Off_Command"),
        ("actuator-9", "hasPoint", "command-9"),
    )
    [found] = SiteModel(g).bind(n.ZONE, (n.ZONE_TEMPERATURE, n.ZONE_VALVES, n.ZONE_BOILERS))
    assert found.subject == Entity("zone", 1)
    assert found.points == {
        "temperature": [Entity("sensor", 5)],
        "valves": [Entity("command", 7)],  # not the fan, not the boiler
        "boilers": [Entity("command", 9)],
    }


def test_a_subject_without_a_point_it_needs_is_left_out_unless_the_need_is_optional():
    g = _graph(
        ("zone-1", "a", "HVAC_Zone"),
        ("zone-2", "a", "HVAC_Zone"),
        ("sensor-5", "a", "Outside_Air_Temperature_Sensor"),  # an air temperature too
        ("sensor-5", "isPointOf", "zone-2"),
        ("sensor-6", "a", "Water_Temperature_Sensor"),  # not air: not a room's temperature
        ("sensor-6", "isPointOf", "zone-1"),
    )
    model = SiteModel(g)
    assert [b.subject for b in model.bind(n.ZONE, (n.ZONE_TEMPERATURE,))] == [Entity("zone", 2)]
    optional = model.bind(n.ZONE, (rules.RULES[rules.OPTIMUM_PINNED].needs[0],))
    assert [(b.subject.pk, b.points["temperature"]) for b in optional] == [
        (1, []),
        (2, [Entity("sensor", 5)]),
    ]


def test_a_path_of_two_steps_finds_a_plants_sensors_through_its_boiler():
    g = _graph(
        ("plant-3", "a", "Hot_Water_System"),
        ("actuator-2", "a", "Electric_Boiler"),
        ("plant-3", "hasPart", "actuator-2"),
        ("command-2", "a", "On_Off_Command"),
        ("actuator-2", "hasPoint", "command-2"),
        ("sensor-1", "a", "Leaving_Hot_Water_Temperature_Sensor"),
        ("sensor-1", "isPointOf", "actuator-2"),
    )
    model = SiteModel(g)
    [plant] = model.bind(n.PLANT, (n.PLANT_BOILER, n.PLANT_FLOW))
    assert plant.points == {"boiler": [Entity("command", 2)], "flow": [Entity("sensor", 1)]}
    assert model.bind(n.PLANT, (n.PLANT_BOILER, n.PLANT_FLOW, n.PLANT_RETURN)) == []


def test_the_subclass_table_is_what_the_brick_ontology_says_of_every_class_a_rule_names():
    """findings/brick_subclasses.json is derived from the ontology (`manage.py
    brick_subclasses`); a rule naming a new class, or a new Brick, must write it again."""
    named = named_classes()
    assert {"HVAC_Zone", "Valve", "Boiler", "Air_Temperature_Sensor"} <= named
    table = json.loads(SUBCLASSES_FILE.read_text())
    assert table == derive(named)  # every named class is a Brick 1.3 class (derive checks)
    assert "Hot_Water_Valve" in table["Valve"] and "Fan" not in table["Valve"]


def test_a_class_no_rule_names_is_refused_plainly():
    with pytest.raises(KeyError, match="brick_subclasses"):
        subclasses("Chiller")
    with pytest.raises(ValueError, match="not a class of Brick"):
        derive(["Not_A_Brick_Class"])


def test_each_rule_on_the_site_says_its_points_in_brick_words():
    rule = rules.RULES[rules.VALVE_PASSING]
    words = [need.brick() for need in rule.needs]
    assert words == [
        "brick:Air_Temperature_Sensor brick:isPointOf it",
        "brick:Valve or brick:Radiator or brick:Pump brick:feeds it, then that brick:hasPoint "
        "brick:On_Off_Command",
        "brick:Boiler brick:feeds it, then that brick:hasPoint brick:On_Off_Command",
    ]


# --- On our own site: what an engineer classes a point as decides which rules judge it ---


def _left_on(site_model):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)  # four hours past 17:00


def test_a_generic_relay_on_a_zone_is_its_heating_valve(site_model):
    from findings.evaluate import evaluate

    site_model["valve"].kind = "relay"
    site_model["valve"].save()
    _left_on(site_model)
    assert evaluate(MONDAY, MONDAY + WEEK).keys == [
        f"{rules.HEATING_UNOCCUPIED}:zone:{site_model['zone'].pk}"
    ]


@pytest.mark.parametrize(
    ("brick_class", "judged"), [("Hot_Water_Valve", True), ("Radiator", True), ("Fan", False)]
)
def test_a_zone_actuator_classed_by_hand_is_judged_as_heat_only_if_its_class_heats(
    site_model, brick_class, judged
):
    from findings.evaluate import evaluate

    site_model["valve"].brick_class = brick_class
    site_model["valve"].save()
    _left_on(site_model)
    keys = evaluate(MONDAY, MONDAY + WEEK).keys
    assert (f"{rules.HEATING_UNOCCUPIED}:zone:{site_model['zone'].pk}" in keys) is judged


def test_a_zone_sensor_classed_by_hand_as_no_air_temperature_is_not_judged_as_the_room(
    site_model,
):
    from findings.evaluate import evaluate

    from .conftest import record

    record(site_model["feed"].pk, MONDAY, 24, lambda m: 60.0)  # out of range all day
    assert any(k.startswith(rules.SENSOR_RANGE) for k in evaluate(MONDAY, MONDAY + WEEK).keys)
    site_model["sensor"].brick_class = "Water_Temperature_Sensor"
    site_model["sensor"].save()
    assert not any(k.startswith(rules.SENSOR_RANGE) for k in evaluate(MONDAY, MONDAY + WEEK).keys)


def test_the_plants_return_sensor_is_in_the_brick_model_for_the_low_delta_t_rule(site_model):
    from feeds.models import Feed
    from findings.brick import site_graph
    from sensors.models import Sensor

    plant = site_model["plant"]
    node = site_model["sensor"].node
    for key, field in (("flow", "flow_sensor"), ("ret", "return_sensor")):
        feed = Feed.objects.create(name=key, tag="t", unit="°C", interval=60)
        setattr(
            plant, field, Sensor.objects.create(node=node, key=key, kind="rtd_pt1000", feed=feed)
        )
    plant.save()
    rule = rules.RULES[rules.LOW_DELTA_T]
    [found] = SiteModel(site_graph()).bind(rule.subject, rule.needs)
    assert found.points == {
        "boiler": [Entity("command", site_model["boiler"].pk)],
        "flow": [Entity("sensor", plant.flow_sensor.pk)],
        "return": [Entity("sensor", plant.return_sensor.pk)],
    }


def test_findings_md_names_every_rules_subject_and_points_in_brick_words():
    text = (Path(__file__).parents[2] / "docs" / "FINDINGS.md").read_text()
    for rule in rules.RULES.values():
        subject = " or ".join(f"`brick:{c}`" for c in rule.subject)
        assert rule.subject and f"| `{rule.name}` | {subject} |" in text, rule.name
        for need in rule.needs:
            assert need.brick() in text, (rule.name, need.name)


def test_a_need_that_must_be_absent_leaves_out_a_meter_of_what_generates():
    g = _graph(
        ("meter-1", "a", "Building_Electrical_Meter"),
        ("meter-point-1", "a", "Electric_Power_Sensor"),
        ("meter-point-1", "isPointOf", "meter-1"),
        ("meter-2", "a", "Electrical_Meter"),
        ("meter-point-2", "a", "Electric_Energy_Sensor"),
        ("meter-point-2", "isPointOf", "meter-2"),
        ("generator-2", "a", "PV_Array"),
        ("meter-2", "meters", "generator-2"),
    )
    rule = rules.RULES[rules.BASE_LOAD_RISING]
    assert [b.subject for b in SiteModel(g).bind(rule.subject, rule.needs)] == [Entity("meter", 1)]
    pv = rules.RULES[rules.PV_LOW_YIELD]
    [array] = SiteModel(g).bind(pv.subject, pv.needs)
    assert (array.subject, array.points["meter"]) == (
        Entity("generator", 2),
        [Entity("meter-point", 2)],
    )
    assert rules.RULES[rules.BASE_LOAD_RISING].needs[1].brick().startswith("not: ")


def test_a_generating_system_is_judged_as_a_hydro_turbine_only_with_a_water_flow_point(db):
    from energy.models import Meter, MeterNode
    from feeds.models import Feed
    from findings.brick import site_graph
    from sensors.models import Site

    site = Site.objects.create(name="CAT", slug="cat")
    node = MeterNode.objects.create(site=site, name="Hydro house", kind="building")

    def gen(name, generator="", flow=None):
        feed = Feed.objects.create(name=name, tag="t", unit="W", interval=3600)
        return Meter.objects.create(node=node, name=name, fuel="generation", source="power",
                                    feed=feed, generator=generator, flow_feed=flow)  # fmt: skip

    flow = Feed.objects.create(name="leat flow", tag="t", unit="l/s", interval=3600)
    turbine, other = gen("Turbine", "hydro", flow), gen("Wind")
    model = SiteModel(site_graph())
    hydro = rules.RULES[rules.HYDRO_NO_OUTPUT]
    assert [b.subject for b in model.bind(hydro.subject, hydro.needs)] == [
        Entity("generator", turbine.pk)
    ]
    base = rules.RULES[rules.BASE_LOAD_RISING]
    assert other.pk not in [b.subject.pk for b in model.bind(base.subject, base.needs)]
