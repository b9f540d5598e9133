"""A plant's pump commanded through an old controller's multi-state output (states 1 Off, 2 On,
3 Auto: the independent bac-py controller's multi-state-output 1, its programme holding Auto at
priority 16): ON and OFF written as the state numbers the actuator names, at our priority,
confirmed by read-back, a higher priority holding it a fault in those words, and handed back
(NULL at our priority) when the plant no longer drives it, the controller's own Auto returning."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from alarms.models import Alarm
from control import runtime
from control.models import ActuatorCommand, Booking, HeatingPlant
from control.runner import run_tick
from sensors.devices.bacnet_devices import add_device
from sensors.models import MAX_MULTI_STATE, Actuator
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

from . import factories as f
from .test_bacnet_tick import BOILER, VALVE, output, read

pytestmark = pytest.mark.django_db
controller = bacnet_peer.controller  # the fixture: the controller as a real process

PUMP = "multi-state-output,1"
OFF, ON, AUTO = 1, 2, 3


def pump_output(device, **states) -> Actuator:
    act = Actuator(
        name="Heating pump", kind="pump", driver=Actuator.Driver.BACNET, bacnet_device=device,
        bacnet_object=PUMP, bacnet_on_state=ON, bacnet_off_state=OFF, min_on_s=0, min_off_s=0,
    )  # fmt: skip
    for field, value in states.items():
        setattr(act, field, value)
    act.full_clean()
    act.save()
    return act


@pytest.fixture
def site(controller):
    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    valve = output("Hall valve", device, VALVE)
    boiler = output("Boiler", device, BOILER, kind="boiler")
    pump = pump_output(device)
    zone = f.zone("Hall", valve, temp=15.0)
    plant = HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, pump=pump, pump_overrun_s=0
    )
    plant.zones.add(zone)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Yoga", start=now - timedelta(minutes=1), end=now + timedelta(hours=2)
    )
    return {"device": device, "pump": pump, "plant": plant, "now": now}


def test_a_pump_on_a_multi_state_output_is_driven_confirmed_and_handed_back(
    redis_client, controller, site
):
    pump, plant, now = site["pump"], site["plant"], site["now"]
    assert (read(controller, PUMP).value, read(controller, PUMP).priority) == (AUTO, 16)

    # The zone calls for heat: the pump runs, written as state 2 (On) at priority 8.
    at = now
    for _ in range(3):
        run_tick(at)
        at += timedelta(seconds=30)
    held = read(controller, PUMP)
    assert (held.value, held.priority, held.ours) == (ON, 8, ON)
    state = runtime.load_actuators([pump.pk])[pump.pk]
    assert state.on is True and state.confirmed and not state.fault
    cmd = ActuatorCommand.objects.filter(actuator=pump, state=True).latest("pk")
    assert cmd.confirmed_at is not None and cmd.error == ""

    # A hand switch at the controller holds it Off at priority 2: a fault, in its words.
    controller.plant(f"write {PUMP} {OFF} 2")
    run_tick(at)
    state = runtime.load_actuators([pump.pk])[pump.pk]
    assert not state.confirmed
    assert state.fault == (
        f"priority 2 holds {PUMP} at state {OFF}: our write at priority 8 is not in force until "
        "it is released"
    )
    alarm = Alarm.objects.get(key=f"relay:{pump.pk}", cleared_at=None)
    assert state.fault in alarm.message
    held_alarm = Alarm.objects.get(key=f"bacnet-priority:{pump.pk}", cleared_at=None)
    assert f"is held at state {OFF} by priority 2, above our priority 8" in held_alarm.message
    controller.plant(f"write {PUMP} null 2")
    at += timedelta(seconds=30)
    run_tick(at)
    assert runtime.load_actuators([pump.pk])[pump.pk].confirmed
    alarm.refresh_from_db()
    assert alarm.cleared_at is not None

    # The plant no longer drives it: NULL at priority 8, the controller's own Auto returns.
    HeatingPlant.objects.filter(pk=plant.pk).update(pump=None)
    at += timedelta(seconds=30)
    run_tick(at)
    back = read(controller, PUMP)
    assert (back.value, back.priority, back.ours) == (AUTO, 16, None)
    released = ActuatorCommand.objects.filter(actuator=pump).latest("pk")
    assert released.reason == (
        "Released from heating plant 'Boiler house': NULL at priority 8, so the controller's own "
        f"logic has {PUMP} again"
    )
    assert released.confirmed_at is not None


@pytest.mark.parametrize(
    ("states", "field", "words"),
    [
        ({"bacnet_on_state": None}, "bacnet_on_state", "needs the state written for ON"),
        ({"bacnet_off_state": None}, "bacnet_off_state", "needs the state written for OFF"),
        ({"bacnet_off_state": ON}, "bacnet_off_state", "different states"),
        ({"bacnet_on_state": MAX_MULTI_STATE + 1}, "bacnet_on_state", "less than or equal"),
        ({"bacnet_off_state": 0}, "bacnet_off_state", "greater than or equal"),
        ({"bacnet_object": "binary-output,3"}, "bacnet_on_state", "Only for a multi-state"),
        ({"bacnet_object": "multi-state-input,1"}, "bacnet_object", "are switched"),
    ],
)
def test_a_multi_state_output_names_two_distinct_states_in_range(controller, states, field, words):
    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    with pytest.raises(ValidationError) as info:
        pump_output(device, **states)
    assert field in info.value.message_dict
    assert words in " ".join(info.value.message_dict[field])


def test_the_state_bound_is_accepted_at_its_edge(controller):
    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    act = pump_output(device, bacnet_on_state=MAX_MULTI_STATE, bacnet_object="multi-state-value,1")
    assert (act.bacnet_on_state, act.bacnet_object) == (MAX_MULTI_STATE, "multi-state-value,1")


def test_bacnet_output_commands_it_by_hand_as_its_states(redis_client, controller, capsys):
    from django.core.management import call_command

    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    pump_output(device)
    call_command("bacnet_output", "Heating pump", "--on", "--reason", "Commissioning")
    assert read(controller, PUMP).value == ON
    assert f"{PUMP} is state {ON}, held by priority 8; our priority 8 holds state {ON}." in (
        capsys.readouterr().out
    )
    call_command("bacnet_output", "Heating pump", "--release", "--reason", "Done")
    back = read(controller, PUMP)
    assert (back.value, back.priority, back.ours) == (AUTO, 16, None)
