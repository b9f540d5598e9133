"""The audit log's filters: ?actuator= and ?strategy= (both used to be ignored)."""

from __future__ import annotations

import pytest

from control.models import ActuatorCommand
from sensors.models import Actuator

pytestmark = pytest.mark.django_db

URL = "/api/v1/actuator-commands"


@pytest.fixture
def log():
    valve = Actuator.objects.create(name="Hall valve", kind="valve", host="10.0.0.9", coil=1)
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host="10.0.0.9", coil=2)
    for actuator, strategy in (
        (valve, "booking"),
        (valve, "frost_protection"),
        (boiler, "heating_plant"),
        (boiler, "frost_protection"),
    ):
        ActuatorCommand.objects.create(
            actuator=actuator, state=True, reason=f"{strategy} reason", strategy=strategy
        )
    return valve, boiler


def rows(client, query: str) -> list[tuple[int, str]]:
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content
    return sorted((r["actuator"], r["strategy"]) for r in response.json()["results"])


def test_filter_by_actuator(viewer_api, log):
    valve, boiler = log
    assert rows(viewer_api, f"actuator={valve.pk}") == [
        (valve.pk, "booking"),
        (valve.pk, "frost_protection"),
    ]
    assert rows(viewer_api, "actuator=999999") == []


def test_filter_by_strategy_and_both(viewer_api, log):
    valve, boiler = log
    assert rows(viewer_api, "strategy=frost_protection") == sorted(
        [(valve.pk, "frost_protection"), (boiler.pk, "frost_protection")]
    )
    assert rows(viewer_api, f"strategy=frost_protection&actuator={boiler.pk}") == [
        (boiler.pk, "frost_protection")
    ]
    assert len(rows(viewer_api, "")) == 4


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("actuator=abc", "actuator"),
        ("actuator=-1", "actuator"),
        ("actuator=" + "9" * 19, "actuator"),  # past any id: no integer overflow in SQL
        ("actuator=", "actuator"),
        ("strategy=", "strategy"),
        ("strategy=" + "x" * 65, "strategy"),  # the column holds 64
    ],
)
def test_bad_filters_are_a_400_naming_the_field(viewer_api, log, query, field):
    response = viewer_api.get(f"{URL}?{query}")
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_the_longest_strategy_name_is_accepted(viewer_api, log):
    assert rows(viewer_api, "strategy=" + "x" * 64) == []


def test_anonymous_is_refused(anon_api, log):
    assert anon_api.get(f"{URL}?actuator={log[0].pk}").status_code in (401, 403)


def test_the_analogue_log_is_filtered_by_plant_and_strategy(viewer_api):
    """Outside test, session 6: `?plant=` was ignored on /api/v1/analogue-commands, and a bad
    value still answered 200 with every plant's rows."""
    from control.models import AnalogueCommand, HeatingPlant

    plants = []
    for n in (1, 2):
        boiler = Actuator.objects.create(name=f"Boiler {n}", kind="boiler", host="10.0.0.9",
                                         coil=10 + n)  # fmt: skip
        plants.append(HeatingPlant.objects.create(name=f"Plant {n}", boiler=boiler))
    for plant, strategy in ((plants[0], "weather"), (plants[0], "manual_override"),
                            (plants[1], "weather")):  # fmt: skip
        AnalogueCommand.objects.create(
            plant=plant, value=40.0, unit="%", raw=4000, reason="r", strategy=strategy
        )
    url = "/api/v1/analogue-commands"

    def got(query: str) -> list[tuple[int, str]]:
        response = viewer_api.get(f"{url}?{query}")
        assert response.status_code == 200, response.content
        body = response.json()
        items = body["results"] if isinstance(body, dict) else body
        return sorted((r["plant"], r["strategy"]) for r in items)

    first, second = plants[0].pk, plants[1].pk
    assert got(f"plant={second}") == [(second, "weather")]
    assert got(f"plant={first}&strategy=weather") == [(first, "weather")]
    assert len(got("")) == 3
    for bad in ("plant=abc", "plant=-1", "plant=" + "9" * 19):
        response = viewer_api.get(f"{url}?{bad}")
        assert response.status_code == 400 and "plant" in response.json()["fields"], bad
