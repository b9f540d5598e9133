"""A weather-compensated plant whose output is a BACnet analog-output (the old BMS's mixing
valve), driven by the control tick against the independent bac-py controller
(tests/sensors/bacnet_controller.py): the valve position written at priority 8 and confirmed
by read-back, audited; a higher priority holding it a fault alarmed in those words; the output
handed back (NULL at priority 8) when the plant lets go of it, the controller's own 20 % at
priority 16 returning."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from alarms.models import Alarm
from control import outputs
from control.bacnet_outputs import HELD_KEY
from control.models import AnalogueCommand, HeatingPlant, WeatherCompensation
from control.runner import run_tick
from feeds.store import service as feed_service
from sensors.devices import bacnet_client
from sensors.devices.bacnet_devices import add_device
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

from . import factories as f
from .test_bacnet_tick import output

pytestmark = pytest.mark.django_db
controller = bacnet_peer.controller
MIXING = "analog-output,1"


def read(controller, priority: int = 8) -> bacnet_client.CommandState:
    """What the controller holds, read by a client of our own."""
    from control.drivers import bacnet

    return bacnet_client.read_command_state(
        controller.address, MIXING, priority=priority, local=bacnet.local_address(),
        client_instance=bacnet.client_instance() + 1, timeout_s=2,
    )  # fmt: skip


@pytest.fixture
def plant(controller):
    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    boiler = output("Boiler", device, "binary-output,1", kind="boiler")
    valve = output("Hall valve", device, "binary-output,2")
    zone = f.zone("Hall", valve, temp=15.0, setback_setpoint=20.0)
    outside, flow = f.temperature_sensor("outside"), f.temperature_sensor("flow")
    now = int(time.time())
    feed_service.log_points([(outside.feed_id, now, 0.0), (flow.feed_id, now, 40.0)])
    plant = HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, outside_sensor=outside, flow_sensor=flow,
        frost_outside_c=-5.0, has_bypass=True,
    )  # fmt: skip
    plant.zones.add(zone)
    wc = WeatherCompensation(
        plant=plant, kp=5.0, ti_s=100.0, output="bacnet", bacnet_device=device,
        bacnet_object=MIXING,
    )  # fmt: skip
    wc.full_clean()
    wc.save()
    return plant


def test_the_valve_position_is_written_at_priority_8_confirmed_and_handed_back(
    redis_client, controller, plant
):
    now = timezone.now()
    run_tick(now)
    row = AnalogueCommand.objects.get(plant=plant)
    assert row.unit == "%" and row.raw is None and row.confirmed_at is not None, row.error
    held = read(controller)
    assert (held.priority, held.ours) == (8, pytest.approx(row.value, abs=0.01))
    assert held.value == pytest.approx(row.value, abs=0.01)
    assert outputs.output_status([plant.pk])[plant.pk]["confirmed"]

    # A hand override at the controller (priority 2) holds the valve: a fault, in its words.
    controller.plant(f"write {MIXING} 35 2")
    run_tick(now + timedelta(seconds=30))
    alarm = Alarm.objects.get(key=f"plant-output:{plant.pk}", cleared_at=None)
    assert (
        f"to BACnet controller boiler-house ({controller.address}) {MIXING} at priority 8 not "
        f"confirmed: priority 2 holds {MIXING} at 35: our write at priority 8 is not in force"
    ) in alarm.message
    controller.plant(f"write {MIXING} null 2")
    run_tick(now + timedelta(seconds=60))
    alarm.refresh_from_db()
    assert alarm.cleared_at is not None

    # The plant lets go (weather compensation off): NULL at 8, the controller's 20 % returns.
    WeatherCompensation.objects.filter(plant=plant).update(enabled=False)
    run_tick(now + timedelta(seconds=90))
    back = read(controller)
    assert (back.value, back.priority, back.ours) == (pytest.approx(20.0), 16, None)
    released = AnalogueCommand.objects.filter(plant=plant).first()
    assert released.reason == (
        f"Released: NULL at priority 8 of {MIXING} ({controller.address}), so the controller's "
        "own logic has it again"
    )
    assert released.confirmed_at is not None
    assert not redis_client.hexists(HELD_KEY, str(plant.pk))
    run_tick(now + timedelta(seconds=120))  # handed back once, not every tick
    assert AnalogueCommand.objects.filter(plant=plant, strategy="released").count() == 1


def test_only_an_analogue_object_of_a_controller_carries_the_output_once(controller, plant):
    wc = plant.weather
    device = wc.bacnet_device
    wc.bacnet_object = "binary-output,1"
    with pytest.raises(ValidationError, match="Only analog-output and analog-value"):
        wc.full_clean()
    wc.bacnet_object = "analog-value,4194302"
    wc.full_clean()
    wc.bacnet_object = "analog-value,4194303"
    with pytest.raises(ValidationError, match="out of range"):
        wc.full_clean()
    wc.bacnet_object, wc.bacnet_device = MIXING, None
    with pytest.raises(ValidationError, match="needs its controller"):
        wc.full_clean()
    for priority, ok in ((0, False), (1, True), (16, True), (17, False)):
        wc.bacnet_device, wc.bacnet_priority = device, priority
        if ok:
            wc.full_clean()
        else:
            with pytest.raises(ValidationError, match="bacnet_priority"):
                wc.full_clean()


def test_two_plants_may_not_drive_one_object(controller, plant):
    other = HeatingPlant.objects.create(name="Annexe", boiler=plant.boiler,
                                        outside_sensor=plant.outside_sensor)  # fmt: skip
    wc = WeatherCompensation(
        plant=other, mode="boiler_setpoint", output="bacnet",
        bacnet_device=plant.weather.bacnet_device, bacnet_object=MIXING,
    )  # fmt: skip
    with pytest.raises(ValidationError, match="already the output of heating plant 'Boiler house'"):
        wc.full_clean()
