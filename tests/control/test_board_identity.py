"""Issue #27 A2: a coil or register is one board's, whatever its host is spelt.

A board saved as `127.0.0.1` was accepted again as `localhost`, and the duplicate coil then
toggled every tick with both actuators "confirmed" and no alarm: the checks compared host
strings. They compare what the host names now (IP literals normalised, names resolved with a
bounded timeout), with the port and unit."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from control.models import HeatingPlant, RelayBoard, WeatherCompensation
from sensors.models import Actuator, board_host

pytestmark = pytest.mark.django_db

ALIASES = [
    "localhost",
    "LOCALHOST",
    "localhost.",
    "127.0.0.1.",
    "127.1",
    "0x7f000001",
    "2130706433",
    "0177.0.0.1",
    "::ffff:127.0.0.1",
    "::FFFF:7f00:1",
]


def boiler(**kw) -> Actuator:
    fields = {"name": "Boiler", "kind": "boiler", "host": "127.0.0.1", "port": 502, "coil": 5}
    return Actuator(**{**fields, **kw})


@pytest.mark.parametrize("alias", ALIASES)
def test_a_second_actuator_on_one_coil_through_a_host_alias_is_refused(alias):
    boiler().save()
    twin = boiler(name="Twin", host=alias)
    with pytest.raises(ValidationError) as err:
        twin.full_clean()
    [message] = err.value.message_dict["coil"]
    assert "is already driven by actuator 'Boiler'" in message
    assert message.endswith("two actuators on one coil would fight.")  # it resolved


@pytest.mark.parametrize("alias", ALIASES)
def test_an_alias_is_the_same_board_for_the_saved_name_too(alias):
    """The other way round: `localhost` saved first, the address typed second."""
    boiler(host=alias).save()
    with pytest.raises(ValidationError) as err:
        boiler(name="Twin").full_clean()
    assert f"(as {alias.lower()})" in err.value.message_dict["coil"][0]


def test_other_addresses_ports_units_and_coils_are_other_coils():
    boiler().save()
    for change in ({"host": "127.0.0.2"}, {"host": "::1"}, {"port": 503}, {"device_id": 2},
                   {"coil": 6}):  # fmt: skip
        boiler(name=f"Other {sorted(change)}", **change).full_clean()


def test_a_name_that_cannot_be_resolved_is_compared_by_name_and_says_so():
    boiler(host="relay-1.invalid").save()  # RFC 6761: never resolves
    with pytest.raises(ValidationError) as err:
        boiler(name="Twin", host="RELAY-1.invalid.").full_clean()
    message = err.value.message_dict["coil"][0]
    assert "already driven by actuator 'Boiler'" in message
    assert message.endswith("('relay-1.invalid' could not be resolved: compared by name)")
    boiler(name="Other", host="relay-2.invalid").full_clean()


def test_literals_are_normalised_without_a_lookup():
    assert board_host("0x7f000001").addresses == {"127.0.0.1"}
    assert board_host("::ffff:127.0.0.1").addresses == {"127.0.0.1"}
    assert board_host("[::1]").addresses == frozenset()  # not a host: validate_host refuses it
    assert not board_host("relay-1.invalid", timeout_s=0.5).resolved


def test_the_api_refuses_the_alias_with_a_400_on_coil(engineer_api):
    body = {"name": "Boiler", "kind": "boiler", "host": "127.0.0.1", "port": 502, "coil": 5}
    assert engineer_api.post("/api/v1/actuators", body, format="json").status_code == 201
    twin = {**body, "name": "Twin", "host": "localhost"}
    response = engineer_api.post("/api/v1/actuators", twin, format="json")
    assert response.status_code == 400
    assert "already driven by actuator 'Boiler'" in response.json()["fields"]["coil"][0]
    assert Actuator.objects.count() == 1


@pytest.mark.parametrize("alias", ["localhost", "127.1", "::ffff:127.0.0.1", "127.0.0.1."])
def test_a_relay_board_is_one_row_whatever_its_host_is_spelt(alias):
    RelayBoard.objects.create(name="Plant room", host="127.0.0.1", port=502)
    with pytest.raises(ValidationError) as err:
        RelayBoard(name="Again", host=alias, port=502).full_clean()
    assert "is already relay board 'Plant room'" in err.value.message_dict["host"][0]
    RelayBoard(name="Unit 2", host=alias, port=502, device_id=2).full_clean()


@pytest.mark.parametrize("alias", ["localhost", "0x7f000001"])
def test_a_watchdog_on_an_outputs_register_through_an_alias_is_refused(alias):
    boiler().save()
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=Actuator.objects.get())
    WeatherCompensation.objects.create(
        plant=plant, register_host="127.0.0.1", register_port=502, register_address=3
    )
    board = RelayBoard(name="Plant room", host=alias, port=502, watchdog_register=3)
    with pytest.raises(ValidationError) as err:
        board.full_clean()
    message = err.value.message_dict["watchdog_register"][0]
    assert "is already the output of heating plant 'Boiler house' (as 127.0.0.1)" in message
    # And the other way round: an output on the watchdog register of a board saved by alias.
    RelayBoard.objects.create(name="Loft", host=alias, port=502, watchdog_register=4)
    output = WeatherCompensation.objects.get()
    output.register_address = 4
    with pytest.raises(ValidationError) as err:
        output.full_clean()
    assert (
        "watchdog register of relay board 'Loft'" in err.value.message_dict["register_address"][0]
    )
