"""The control tick drives BACnet outputs as it drives Modbus relays, against the independent
bac-py controller (tests/sensors/bacnet_controller.py) in its own process: written at the
actuator's priority, confirmed only by read-back, a higher priority holding the point a fault
that the boiler interlock treats as a shut valve, a released output relinquished so the
controller's own value returns, a dead controller alarmed without stalling the tick."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from alarms.models import Alarm
from control import config_cache, runtime
from control.drivers import bacnet
from control.models import ActuatorCommand, Booking, HeatingPlant
from control.runner import run_tick
from control.status import actuator_status
from sensors.devices import bacnet_client
from sensors.devices.bacnet_devices import add_device
from sensors.models import Actuator
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

from . import factories as f

pytestmark = pytest.mark.django_db
controller = bacnet_peer.controller  # the fixture: the controller as a real process

VALVE, BOILER = "binary-output,2", "binary-output,1"


def output(name: str, device, ref: str, kind: str = "valve", priority: int = 8) -> Actuator:
    act = Actuator(
        name=name, kind=kind, driver=Actuator.Driver.BACNET, bacnet_device=device,
        bacnet_object=ref, bacnet_priority=priority, min_on_s=0, min_off_s=0,
    )  # fmt: skip
    act.full_clean()
    act.save()
    return act


def read(controller, ref: str, priority: int = 8) -> bacnet_client.CommandState:
    """What the controller holds, read by a client of our own (as `bacnet_output --status`)."""
    return bacnet_client.read_command_state(
        controller.address, ref, priority=priority, local=bacnet.local_address(),
        client_instance=bacnet.client_instance() + 1, timeout_s=2,
    )  # fmt: skip


def hand_switch(controller, ref: str, state: bool | None, priority: int = 2) -> None:
    """Someone at the controller's own panel (or a life-safety override) holds the point."""
    bacnet_client.command_binary(
        controller.address, ref, state, priority=priority, local=bacnet.local_address(),
        client_instance=bacnet.client_instance() + 1, timeout_s=2,
    )  # fmt: skip


@pytest.fixture
def site(controller):
    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    valve = output("Hall valve", device, VALVE)
    boiler = output("Boiler", device, BOILER, kind="boiler")
    zone = f.zone("Hall", valve, temp=15.0)
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
    plant.zones.add(zone)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Yoga", start=now - timedelta(minutes=1), end=now + timedelta(hours=2)
    )
    return {"device": device, "valve": valve, "boiler": boiler, "zone": zone, "now": now}


def test_a_zone_calling_for_heat_opens_its_valve_at_priority_8_confirmed_by_read_back(
    redis_client, controller, site
):
    valve, boiler, now = site["valve"], site["boiler"], site["now"]
    report = run_tick(now)
    assert report["faults"] == 0
    held = read(controller, VALVE)
    assert (held.value, held.priority, held.ours) == (True, 8, True)
    cmd = ActuatorCommand.objects.get(actuator=valve)
    assert cmd.state is True and cmd.strategy == "booking"
    assert cmd.sent_at is not None and cmd.confirmed_at is not None and cmd.error == ""
    state = runtime.load_actuators([valve.pk])[valve.pk]
    assert state.confirmed and state.on is True and not state.fault
    # The boiler fires once the valve is confirmed open: OFF at our priority first, then ON.
    assert read(controller, BOILER).priority == 8 and read(controller, BOILER).value is False
    run_tick(now + timedelta(seconds=30))
    fired = read(controller, BOILER)
    assert (fired.value, fired.priority, fired.ours) == (True, 8, True)
    assert runtime.load_actuators([boiler.pk])[boiler.pk].confirmed


def test_a_higher_priority_holding_the_valve_is_a_fault_and_the_boiler_treats_it_as_shut(
    redis_client, controller, site
):
    valve, boiler, now = site["valve"], site["boiler"], site["now"]
    run_tick(now)
    run_tick(now + timedelta(seconds=30))
    assert read(controller, BOILER).value is True
    hand_switch(controller, VALVE, False, priority=2)

    report = run_tick(now + timedelta(seconds=60))
    assert report["faults"] == 1
    state = runtime.load_actuators([valve.pk])[valve.pk]
    assert not state.confirmed
    assert state.fault == (
        f"priority 2 holds {VALVE} at OFF: our write at priority 8 is not in force until it is "
        "released"
    )
    alarm = Alarm.objects.get(key=f"relay:{valve.pk}", cleared_at=None)
    assert alarm.message == (
        f"Actuator 'Hall valve' (BACnet controller boiler-house ({controller.address}) {VALVE} "
        f"at priority 8) did not confirm ON: {state.fault}"
    )
    held = Alarm.objects.get(key=f"bacnet-priority:{valve.pk}", cleared_at=None)
    assert (held.severity, held.message) == (
        "warning",
        f"BACnet controller boiler-house (device {INSTANCE} at {controller.address}): {VALVE} "
        "(actuator 'Hall valve') is held at OFF by priority 2, above our priority 8: it is not "
        "ours to command until that priority is released (a hand switch at the controller, or "
        "a life-safety override).",
    )
    # Decisions use confirmed state: the next tick knows no valve is confirmed open, so it
    # switches the boiler off (as it would for a Modbus valve that read back shut).
    run_tick(now + timedelta(seconds=90))
    off = read(controller, BOILER)
    assert (off.value, off.priority, off.ours) == (False, 8, False)
    boiler_state = runtime.load_actuators([boiler.pk])[boiler.pk]
    assert boiler_state.on is False
    assert boiler_state.reason == "No zone can take heat (Hall: every valve in fault)"
    assert Alarm.objects.filter(key__startswith="zone-valves:", cleared_at=None).exists()
    row = ActuatorCommand.objects.filter(actuator=valve).first()
    assert row.reason.startswith("Retry after a fault") and "priority 2 holds" in row.error

    hand_switch(controller, VALVE, None, priority=2)  # the hand switch goes back to auto
    run_tick(now + timedelta(seconds=120))
    assert runtime.load_actuators([valve.pk])[valve.pk].confirmed
    alarm.refresh_from_db()
    held.refresh_from_db()
    assert alarm.cleared_at is not None and held.cleared_at is not None
    recovered = ActuatorCommand.objects.filter(actuator=valve).first()
    assert recovered.reason.startswith(
        "Recovered after a fault: controller confirmed ON at priority 8"
    )


def test_a_released_valve_is_relinquished_and_the_controllers_own_value_returns(
    redis_client, controller, site
):
    valve, zone, now = site["valve"], site["zone"], site["now"]
    run_tick(now)
    assert read(controller, VALVE).value is True
    zone.actuators.remove(valve)  # the valve leaves the zone: nothing drives it now

    run_tick(now + timedelta(seconds=30))
    back = read(controller, VALVE)
    # The controller's own programme (OFF at priority 16) has the point again.
    assert (back.value, back.priority, back.ours) == (False, 16, None)
    row = ActuatorCommand.objects.filter(actuator=valve).first()
    assert row.reason == (
        f"Released from zone 'Hall': NULL at priority 8, so the controller's own logic has "
        f"{VALVE} again"
    )
    assert row.confirmed_at is not None and row.error == ""
    state = runtime.load_actuators([valve.pk])[valve.pk]
    # Its state is the controller's: unknown to us, never counted as confirmed open.
    assert (state.on, state.confirmed, state.relinquished) == (None, False, True)
    [shown] = [r for r in actuator_status() if r["id"] == valve.pk]
    assert shown["state"] == "released to its controller"
    assert shown["owner"] == "not controlled — handed back to its BACnet controller"

    # Handed back is left alone: the next tick neither writes nor audits it again.
    hand_switch(controller, VALVE, True, priority=8)  # an engineer's `bacnet_output --on`
    run_tick(now + timedelta(seconds=60))
    assert ActuatorCommand.objects.filter(actuator=valve).count() == 2
    assert read(controller, VALVE).ours is True

    # Driven again (back in its zone): taken back at our priority, audited as a change.
    zone.actuators.add(valve)
    run_tick(now + timedelta(seconds=90))
    assert runtime.load_actuators([valve.pk])[valve.pk].relinquished is False
    assert ActuatorCommand.objects.filter(actuator=valve).first().strategy == "booking"


def test_a_disabled_output_is_handed_back_once(redis_client, controller, site):
    valve, now = site["valve"], site["now"]
    run_tick(now)
    assert read(controller, VALVE).ours is True
    valve.enabled = False
    valve.save()
    run_tick(now + timedelta(seconds=30))
    back = read(controller, VALVE)
    assert (back.value, back.priority, back.ours) == (False, 16, None)
    row = ActuatorCommand.objects.filter(actuator=valve).first()
    assert row.reason == (
        f"Actuator disabled: NULL at priority 8, so the controller's own logic has {VALVE} again"
    )
    assert row.confirmed_at is not None and row.error == ""
    run_tick(now + timedelta(seconds=60))
    assert ActuatorCommand.objects.filter(actuator=valve).count() == 2  # not again


def test_our_slot_lost_by_the_controller_is_rewritten_and_audited(redis_client, controller, site):
    valve, now = site["valve"], site["now"]
    run_tick(now)
    hand_switch(controller, VALVE, None, priority=8)  # a restart cleared its priority array
    report = run_tick(now + timedelta(seconds=30))
    assert report["corrected"] == 1
    assert read(controller, VALVE).ours is True
    row = ActuatorCommand.objects.filter(actuator=valve).first()
    assert row.reason.startswith(f"Re-asserted: priority 8 of {VALVE} held NULL, should be ON")
    assert row.confirmed_at is not None


def test_a_dead_controller_is_alarmed_and_not_confirmed_and_the_tick_goes_on(
    redis_client, controller, site, settings
):
    valve, boiler, now = site["valve"], site["boiler"], site["now"]
    settings.BMS_CONTROL_DEVICE_TIMEOUT = 0.3
    controller.stop()
    report = run_tick(now)
    assert report["faults"] == 2  # the valve and the boiler: both its outputs
    state = runtime.load_actuators([valve.pk])[valve.pk]
    assert not state.confirmed and "no answer within 0.3 s" in state.fault
    alarm = Alarm.objects.get(key=f"relay:{valve.pk}", cleared_at=None)
    assert "did not confirm ON" in alarm.message and "no answer within 0.3 s" in alarm.message
    cmd = ActuatorCommand.objects.get(actuator=boiler)
    assert cmd.confirmed_at is None and "no answer" in cmd.error

    controller.start()
    run_tick(now + timedelta(seconds=30))
    assert runtime.load_actuators([valve.pk])[valve.pk].confirmed
    assert not Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at=None).exists()


def test_the_configuration_cache_keeps_what_the_driver_needs_while_the_database_is_away(
    redis_client, controller, site
):
    valve = site["valve"]
    run_tick(site["now"])
    live = config_cache.rebuild(config_cache.load(), site["now"])
    cached = live.actuators[valve.pk]
    target = bacnet.target_for(cached, True)
    assert (target.address, target.ref, target.priority) == (controller.address, VALVE, 8)
    assert bacnet.where(cached) == (
        f"BACnet controller boiler-house ({controller.address}) {VALVE} at priority 8"
    )
