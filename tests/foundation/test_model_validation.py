"""Validation lives in the models, so admin, API and scripts refuse the same things."""

from datetime import date, time, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from control.models import Booking, Override, Schedule, ScheduleException, SchedulePeriod, Zone
from displays.models import Display, Panel
from sensors.models import Actuator, Node, Sensor, Site

pytestmark = pytest.mark.django_db


def test_booking_that_ends_before_it_starts_is_refused():
    zone = Zone.objects.create(name="Room 3", slug="room-3")
    now = timezone.now()
    booking = Booking(zone=zone, title="Backwards", start=now, end=now - timedelta(minutes=5))
    with pytest.raises(ValidationError) as err:
        booking.full_clean()
    assert "must end after it starts" in str(err.value.message_dict["end"])


def test_booking_in_an_unbookable_zone_is_refused():
    zone = Zone.objects.create(name="Plant room", slug="plant", bookable=False)
    now = timezone.now()
    with pytest.raises(ValidationError, match="not bookable"):
        Booking(zone=zone, title="x", start=now, end=now + timedelta(hours=1)).full_clean()


def test_overlapping_schedule_periods_are_refused_and_touching_ones_allowed():
    schedule = Schedule.objects.create(name="Weekdays")
    SchedulePeriod.objects.create(schedule=schedule, weekday=0, start=time(8), end=time(12))
    with pytest.raises(ValidationError, match="overlaps"):
        SchedulePeriod(schedule=schedule, weekday=0, start=time(11, 30), end=time(13)).full_clean()
    SchedulePeriod(schedule=schedule, weekday=0, start=time(12), end=time(13)).full_clean()


def test_schedule_period_must_not_end_when_it_starts():
    schedule = Schedule.objects.create(name="Evenings")
    with pytest.raises(ValidationError, match="must not end when it starts"):
        SchedulePeriod(schedule=schedule, weekday=4, start=time(18), end=time(18)).full_clean()


def test_a_night_period_crosses_midnight_and_its_overlaps_are_refused():
    """22:00–06:00 was refused (end before start); it is a night period now."""
    schedule = Schedule.objects.create(name="Nights")
    SchedulePeriod(schedule=schedule, weekday=0, start=time(22), end=time(6)).full_clean()
    SchedulePeriod.objects.create(schedule=schedule, weekday=0, start=time(22), end=time(6))
    SchedulePeriod.objects.create(schedule=schedule, weekday=6, start=time(23), end=time(1))
    with pytest.raises(ValidationError, match="overlaps Monday 22:00"):  # Tuesday morning
        SchedulePeriod(schedule=schedule, weekday=1, start=time(5), end=time(7)).full_clean()
    with pytest.raises(ValidationError, match="overlaps Sunday 23:00"):  # the week wraps
        SchedulePeriod(schedule=schedule, weekday=0, start=time(0, 30), end=time(2)).full_clean()
    SchedulePeriod(schedule=schedule, weekday=1, start=time(6), end=time(7)).full_clean()
    SchedulePeriod(schedule=schedule, weekday=0, start=time(1), end=time(22)).full_clean()


def test_occupied_exception_day_needs_hours():
    schedule = Schedule.objects.create(name="Events")
    with pytest.raises(ValidationError, match="start and an end"):
        ScheduleException(schedule=schedule, date=date(2026, 12, 24), occupied=True).full_clean()
    ScheduleException(
        schedule=schedule, date=date(2026, 12, 25), description="Christmas"
    ).full_clean()


@pytest.mark.parametrize("coil", [65536, 100000])
def test_coil_address_out_of_range_is_refused(coil):
    actuator = Actuator(name="Boiler", host="10.0.0.2", coil=coil)
    with pytest.raises(ValidationError) as err:
        actuator.full_clean()
    assert "coil" in err.value.message_dict


def test_coil_address_at_the_limits_is_accepted():
    Actuator(name="First", host="10.0.0.2", coil=0).full_clean()
    Actuator(name="Last", host="10.0.0.2", coil=65535).full_clean()


def test_node_queue_actuator_needs_a_node():
    with pytest.raises(ValidationError, match="needs the node"):
        Actuator(name="Valve", driver=Actuator.Driver.NODE_QUEUE).full_clean()


def test_zone_frost_band_and_cutoff_must_make_sense():
    with pytest.raises(ValidationError) as err:
        Zone(name="Z", slug="z", frost_on=7, frost_off=5).full_clean()
    assert "frost_off" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        Zone(name="Z2", slug="z2", comfort_setpoint=22, max_temperature=21).full_clean()
    assert "max_temperature" in err.value.message_dict


def test_override_needs_exactly_one_target_and_a_future_expiry():
    actuator = Actuator.objects.create(name="Pump", host="10.0.0.3")
    now = timezone.now()
    with pytest.raises(ValidationError, match="exactly one"):
        Override(state=True, expires=now + timedelta(hours=1), reason="x").full_clean()
    with pytest.raises(ValidationError, match="expire after"):
        Override(actuator=actuator, state=True, starts=now, expires=now, reason="x").full_clean()


def test_override_is_active_only_inside_its_window():
    actuator = Actuator.objects.create(name="Pump 2", host="10.0.0.3")
    now = timezone.now()
    override = Override(
        actuator=actuator, state=True, starts=now, expires=now + timedelta(hours=1), reason="x"
    )
    assert override.is_active(now + timedelta(minutes=30))
    assert not override.is_active(now + timedelta(hours=2))


def test_sensor_valid_range_must_be_ordered():
    node = Node(name="n1")
    node.set_new_key()
    node.save()
    with pytest.raises(ValidationError, match="greater than"):
        Sensor(node=node, key="t", min_valid=10, max_valid=5).full_clean()


def test_site_time_zone_must_exist():
    with pytest.raises(ValidationError, match="Unknown time zone"):
        Site(name="X", slug="x", time_zone="Europe/Atlantis").full_clean()


def test_panel_colour_must_be_hex():
    display = Display.objects.create(slug="pv", title="PV")
    with pytest.raises(ValidationError, match="hex colour"):
        Panel(display=display, kind="live_value", label="x", colour="red").full_clean()


def test_modbus_node_needs_a_host():
    node = Node(name="meter", protocol=Node.Protocol.MODBUS)
    node.set_new_key()
    with pytest.raises(ValidationError, match="needs a host"):
        node.full_clean()
