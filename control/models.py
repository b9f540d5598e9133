"""Zones, schedules, bookings, overrides and the actuator command audit log."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from sensors.models import Actuator, Sensor, Site


class Schedule(models.Model):
    """Weekly occupancy periods with setpoints, plus exception days (holidays)."""

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="schedules", null=True, blank=True
    )
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SchedulePeriod(models.Model):
    class Weekday(models.IntegerChoices):
        MONDAY = 0
        TUESDAY = 1
        WEDNESDAY = 2
        THURSDAY = 3
        FRIDAY = 4
        SATURDAY = 5
        SUNDAY = 6

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="periods")
    weekday = models.PositiveSmallIntegerField(choices=Weekday.choices)
    start = models.TimeField()
    end = models.TimeField(
        help_text="Local wall-clock time; before the start means the next day (22:00–06:00)."
    )
    setpoint = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(35)],
        help_text="°C; empty uses the zone's comfort setpoint.",
    )

    class Meta:
        ordering = ["schedule", "weekday", "start"]

    def __str__(self) -> str:
        return f"{self.get_weekday_display()} {self.start:%H:%M}–{self.end:%H:%M}"

    def week_minutes(self) -> tuple[int, int]:
        """[start, end) in minutes from Monday 00:00; an end at or before the start is the
        next day (a night period), so the end may pass the end of the week."""
        start = self.weekday * 1440 + self.start.hour * 60 + self.start.minute
        length = (self.end.hour * 60 + self.end.minute) - (self.start.hour * 60 + self.start.minute)
        return start, start + (length if length > 0 else length + 1440)

    def clean(self) -> None:
        if self.start is None or self.end is None or self.weekday is None:
            return
        if self.end == self.start:
            raise ValidationError(
                {"end": "The period must not end when it starts (an end before the start "
                 "means the next day)."}
            )  # fmt: skip
        if self.schedule_id is None:
            return
        # Across midnight a period meets the next day's (and Sunday's meets Monday's): compare
        # on the week as a circle.
        week = 7 * 1440
        start, end = self.week_minutes()
        for other in SchedulePeriod.objects.filter(schedule_id=self.schedule_id).exclude(
            pk=self.pk
        ):
            o_start, o_end = other.week_minutes()
            if any(start < o_end + shift and o_start + shift < end for shift in (-week, 0, week)):
                raise ValidationError(
                    f"This period overlaps {other} on the same schedule; periods must not overlap."
                )


class ScheduleException(models.Model):
    """A day the weekly periods do not apply: a holiday (off) or a special day."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="exceptions")
    date = models.DateField()
    description = models.CharField(max_length=200, blank=True)
    occupied = models.BooleanField(
        default=False,
        help_text="Unticked: unoccupied all day (holiday). Ticked: occupied from start to end.",
    )
    start = models.TimeField(null=True, blank=True)
    end = models.TimeField(null=True, blank=True)

    class Meta:
        ordering = ["schedule", "date"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "date"], name="exception_unique_day")
        ]

    def __str__(self) -> str:
        return f"{self.date} {self.description}".strip()

    def clean(self) -> None:
        if self.occupied:
            if self.start is None or self.end is None:
                raise ValidationError("An occupied exception day needs a start and an end time.")
            if self.end == self.start:
                raise ValidationError(
                    {"end": "It must not end when it starts (before the start: the next day)."}
                )


class Zone(models.Model):
    """A room or heating circuit with its temperature sensor, actuators and setpoints."""

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="zones", null=True, blank=True
    )
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(unique=True)
    temperature_sensor = models.ForeignKey(
        Sensor, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actuators = models.ManyToManyField(
        Actuator, blank=True, related_name="zones", help_text="Radiator valves / circuit pumps."
    )
    schedule = models.ForeignKey(
        Schedule, on_delete=models.SET_NULL, null=True, blank=True, related_name="zones"
    )
    comfort_setpoint = models.FloatField(
        default=20.0, validators=[MinValueValidator(5), MaxValueValidator(30)]
    )
    setback_setpoint = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(5), MaxValueValidator(30)],
        help_text="°C outside occupancy; empty = heating off (frost protection still applies).",
    )
    frost_on = models.FloatField(default=5.0, help_text="Frost protection on below (°C).")
    frost_off = models.FloatField(default=7.0, help_text="Frost protection off at (°C).")
    max_temperature = models.FloatField(
        default=28.0, help_text="Over-temperature cut-off (°C): heating off above this."
    )
    hysteresis = models.FloatField(
        default=0.3,
        validators=[MinValueValidator(0.05), MaxValueValidator(5)],
        help_text="K each side.",
    )
    optimum_start = models.BooleanField(default=True)
    optimum_stop = models.BooleanField(default=False)
    max_preheat_min = models.PositiveIntegerField(
        default=180, validators=[MaxValueValidator(24 * 60)], help_text="Bound on pre-heat (min)."
    )
    heating_rate_min_per_k = models.FloatField(
        default=20.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(600)],
        help_text="Learned: minutes to raise the zone 1 K. Updated after each occupancy start.",
    )
    sensor_stale_after_s = models.PositiveIntegerField(
        default=900, help_text="A reading older than this is stale: frost protection only."
    )
    bookable = models.BooleanField(default=True)
    ical_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="Subscribe to an http(s):// .ics URL for bookings (public hosts only, unless "
        "BMS_ICAL_ALLOWED_HOSTS names it).",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.frost_off <= self.frost_on:
            raise ValidationError(
                {"frost_off": "Frost protection must switch off above where it switches on."}
            )
        if self.max_temperature <= self.comfort_setpoint:
            raise ValidationError(
                {"max_temperature": "The cut-off must be above the comfort setpoint."}
            )
        if self.setback_setpoint is not None and self.setback_setpoint > self.comfort_setpoint:
            raise ValidationError(
                {"setback_setpoint": "Setback must not exceed the comfort setpoint."}
            )
        if self.ical_url:
            self._check_ical_url()

    def _check_ical_url(self) -> None:
        """No file paths, no other schemes, no host inside the server or its LAN (issue #14).
        The fetch checks again: a name may resolve elsewhere by then."""
        from control.ical_fetch import FetchRefused, check_addresses, parse, resolve

        try:
            target = parse(self.ical_url)
        except FetchRefused as exc:
            raise ValidationError({"ical_url": str(exc)}) from exc
        try:
            addresses = resolve(target.host, target.port)
        except FetchRefused:
            # DNS down or a name not yet published: not a reason to refuse saving the zone
            # (its setpoints, say). The fetch checks the addresses; an error raises `ical:`.
            return
        try:
            check_addresses(target.host, addresses)
        except FetchRefused as exc:
            raise ValidationError({"ical_url": str(exc)}) from exc


# Who cancelled a booking when its iCal feed cancelled it (a username never has a space).
CANCELLED_BY_FEED = "iCal feed"


def booking_max_days() -> float:
    return float(getattr(settings, "BMS_BOOKING_MAX_DAYS", 14))


class Booking(models.Model):
    class Source(models.TextChoices):
        ADMIN = "admin"
        STAFF_PAGE = "staff", "Staff booking page"
        API = "api"
        ICAL = "ical", "iCal feed"

    zone = models.ForeignKey(Zone, on_delete=models.CASCADE, related_name="bookings")
    title = models.CharField(max_length=200)
    start = models.DateTimeField()
    end = models.DateTimeField()
    booked_by = models.CharField(max_length=100, blank=True)
    setpoint = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(5), MaxValueValidator(30)],
        help_text="°C; empty uses the zone's comfort setpoint.",
    )
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.ADMIN)
    ical_uid = models.CharField(max_length=255, blank=True, db_index=True)
    cancelled = models.BooleanField(default=False)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.CharField(
        max_length=150, blank=True, help_text="Who cancelled it ('iCal feed': its calendar did)."
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["start"]
        indexes = [models.Index(fields=["zone", "start", "end"])]

    def __str__(self) -> str:
        local = timezone.localtime
        return f"{self.title} {local(self.start):%a %d %b %H:%M}–{local(self.end):%H:%M}"

    def clean(self) -> None:
        """The booking rules, for the staff page, the API and the admin alike."""
        if self.start is None or self.end is None:
            return
        if self.end <= self.start:
            raise ValidationError({"end": "A booking must end after it starts."})
        max_days = booking_max_days()
        if self.end - self.start > timedelta(days=max_days):
            raise ValidationError({"end": f"A booking may last at most {max_days:g} days."})
        if self.zone_id is None:
            return
        if not self.zone.bookable:
            raise ValidationError({"zone": f"Zone '{self.zone}' is not bookable."})
        if self.setpoint is not None and self.setpoint >= self.zone.max_temperature:
            raise ValidationError(
                {
                    "setpoint": f"Must be below the zone's cut-off of "
                    f"{self.zone.max_temperature:g} °C."
                }
            )
        if not self.cancelled:
            clash = self.clashes().first()
            if clash is not None:
                raise ValidationError({"start": f"This clashes with {clash}."})

    def clashes(self) -> models.QuerySet[Booking]:
        """Bookings in force of the same zone that overlap this one."""
        return Booking.objects.filter(
            zone_id=self.zone_id, cancelled=False, start__lt=self.end, end__gt=self.start
        ).exclude(pk=self.pk)

    @property
    def cancelled_by_person(self) -> bool:
        """Cancelled by a booker or engineer (an iCal sync must not bring it back)."""
        return self.cancelled and self.cancelled_by not in ("", CANCELLED_BY_FEED)

    def cancel(self, by: str) -> None:
        """Cancel, never delete: the audit trail keeps every booking."""
        if self.cancelled:
            return
        self.cancelled, self.cancelled_at, self.cancelled_by = True, timezone.now(), by[:150]
        self.save(update_fields=["cancelled", "cancelled_at", "cancelled_by"])


class Override(models.Model):
    """A manual override of an actuator (or all a zone's actuators) until it expires."""

    actuator = models.ForeignKey(
        Actuator, on_delete=models.CASCADE, null=True, blank=True, related_name="overrides"
    )
    zone = models.ForeignKey(
        Zone, on_delete=models.CASCADE, null=True, blank=True, related_name="overrides"
    )
    state = models.BooleanField(help_text="On (ticked) or off.")
    starts = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField()
    reason = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    cancelled = models.BooleanField(default=False)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.CharField(max_length=150, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-starts"]

    def __str__(self) -> str:
        target = self.actuator or self.zone
        return f"{target} {'ON' if self.state else 'OFF'} until {timezone.localtime(self.expires):%d %b %H:%M}"

    def clean(self) -> None:
        if (self.actuator_id is None) == (self.zone_id is None):
            raise ValidationError("An override applies to exactly one actuator or one zone.")
        if self.starts is not None and self.expires is not None and self.expires <= self.starts:
            raise ValidationError({"expires": "An override must expire after it starts."})

    def cancel(self, by: str) -> None:
        """Cancel, never delete: the audit trail keeps every override."""
        if self.cancelled:
            return
        self.cancelled, self.cancelled_at, self.cancelled_by = True, timezone.now(), by[:150]
        self.save(update_fields=["cancelled", "cancelled_at", "cancelled_by"])

    def is_active(self, at=None) -> bool:
        at = at or timezone.now()
        return not self.cancelled and self.starts <= at < self.expires


class ActuatorCommand(models.Model):
    """Audit log: every command sent to an actuator, with why and what came back."""

    actuator = models.ForeignKey(Actuator, on_delete=models.PROTECT, related_name="commands")
    state = models.BooleanField()
    reason = models.TextField()
    strategy = models.CharField(max_length=64, blank=True, help_text="Strategy that decided it.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now, db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at"]
        indexes = [models.Index(fields=["actuator", "-requested_at"])]

    def __str__(self) -> str:
        return f"{self.actuator} {'ON' if self.state else 'OFF'} @ {self.requested_at:%Y-%m-%d %H:%M:%S}"

    @property
    def status(self) -> str:
        if self.error:
            return "fault"
        if self.confirmed_at:
            return "confirmed"
        if self.sent_at:
            return "sent"
        return "requested"


# --- Plant-level configuration (control engineer) -------------------------------------------
# Defaults from manufacturers' controllers (Siemens RVA/RVP, RESOL DeltaSol): see docs/CONTROL.md.


class HeatingPlant(models.Model):
    """A boiler fed by its zones' heat demand, and a circulation pump that overruns after it."""

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="heating_plants", null=True, blank=True
    )
    name = models.CharField(max_length=100, unique=True)
    boiler = models.ForeignKey(Actuator, on_delete=models.PROTECT, related_name="+")
    pump = models.ForeignKey(
        Actuator, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    zones = models.ManyToManyField(Zone, blank=True, related_name="heating_plants")
    outside_sensor = models.ForeignKey(
        Sensor,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Outside air temperature: plant frost protection, and the fallback of a zone "
        "whose own sensor is lost.",
    )
    frost_outside_c = models.FloatField(
        default=1.5,
        validators=[MinValueValidator(-20), MaxValueValidator(10)],
        help_text="Plant frost protection below this outside temperature (°C; Siemens: 1.5).",
    )
    pump_overrun_s = models.PositiveIntegerField(
        default=360,
        validators=[MaxValueValidator(3600)],
        help_text="Pump keeps running this long after the boiler stops (s).",
    )
    pump_kick = models.BooleanField(default=True, help_text="Run an idle pump weekly.")
    pump_kick_idle_days = models.PositiveIntegerField(
        default=7, validators=[MinValueValidator(1), MaxValueValidator(60)]
    )
    pump_kick_s = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1), MaxValueValidator(600)]
    )
    has_bypass = models.BooleanField(
        default=False,
        help_text="The circuit has a bypass (valve or open loop), so the pump may run with every "
        "zone valve closed. Unticked: while the pump runs or the boiler fires, the zone valves "
        "open at the last tick (else those of the first zone) are held open.",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.boiler_id is not None and self.boiler_id == self.pump_id:
            raise ValidationError(
                {"pump": "The pump must be a different actuator from the boiler."}
            )
        from control.claims import conflict

        for name in ("boiler", "pump"):
            actuator = getattr(self, name) if getattr(self, f"{name}_id") else None
            problem = conflict([actuator], plant_id=self.pk, claimant="plant")
            if problem:
                raise ValidationError({name: problem})


class SolarCircuit(models.Model):
    """A solar thermal circuit: collector and tank sensors, one pump (differential control)."""

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="solar_circuits", null=True, blank=True
    )
    name = models.CharField(max_length=100, unique=True)
    collector_sensor = models.ForeignKey(Sensor, on_delete=models.PROTECT, related_name="+")
    tank_sensor = models.ForeignKey(Sensor, on_delete=models.PROTECT, related_name="+")
    pump = models.ForeignKey(Actuator, on_delete=models.PROTECT, related_name="+")
    delta_on = models.FloatField(default=6.0, help_text="Pump on at collector − tank ≥ this (K).")
    delta_off = models.FloatField(default=4.0, help_text="Pump off at collector − tank ≤ this (K).")
    tank_max = models.FloatField(default=60.0, help_text="Tank maximum (°C).")
    tank_hysteresis = models.FloatField(default=2.0, validators=[MinValueValidator(0.1)])
    collector_emergency = models.FloatField(
        default=130.0, help_text="Collector emergency stop (°C)."
    )
    emergency_hysteresis = models.FloatField(default=10.0, validators=[MinValueValidator(1)])
    antifreeze_on = models.FloatField(
        default=4.0, help_text="Collector antifreeze below (°C): circulate tank heat."
    )
    antifreeze_off = models.FloatField(default=5.0)
    sensor_stale_after_s = models.PositiveIntegerField(default=900)
    pump_kick = models.BooleanField(default=True)
    pump_kick_idle_days = models.PositiveIntegerField(
        default=7, validators=[MinValueValidator(1), MaxValueValidator(60)]
    )
    pump_kick_s = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1), MaxValueValidator(600)]
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.delta_off >= self.delta_on:
            raise ValidationError({"delta_off": "ΔT off must be below ΔT on."})
        if self.antifreeze_off <= self.antifreeze_on:
            raise ValidationError({"antifreeze_off": "Must be above the antifreeze on point."})
        if self.tank_max >= self.collector_emergency:
            raise ValidationError({"tank_max": "Must be below the collector emergency stop."})
        from control.claims import conflict

        if self.pump_id is not None:
            problem = conflict([self.pump], solar_id=self.pk, claimant="solar")
            if problem:
                raise ValidationError({"pump": problem})


class ZoneTuning(models.Model):
    """Optimum stop settings of a zone (optional: defaults apply without a row)."""

    zone = models.OneToOneField(Zone, on_delete=models.CASCADE, related_name="tuning")
    cooling_rate_min_per_k = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(1), MaxValueValidator(6000)],
        help_text="Minutes the unheated zone takes to lose 1 K (optimum stop).",
    )
    coast_allowance_k = models.FloatField(
        default=0.5,
        validators=[MinValueValidator(0), MaxValueValidator(3)],
        help_text="How far below setpoint the zone may drift by the end of an occupancy.",
    )

    def __str__(self) -> str:
        return f"Tuning of {self.zone}"


class OptimumStartLog(models.Model):
    """One learning step of optimum start, after an occupancy that was pre-heated."""

    zone = models.ForeignKey(Zone, on_delete=models.CASCADE, related_name="optimum_log")
    occupancy_start = models.DateTimeField()
    label = models.CharField(max_length=300, blank=True)
    setpoint = models.FloatField()
    preheat_started = models.DateTimeField()
    temp_at_preheat = models.FloatField()
    temp_at_start = models.FloatField()
    miss_k = models.FloatField(help_text="Setpoint − temperature at occupancy start (K).")
    rate_before = models.FloatField()
    rate_after = models.FloatField()
    note = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occupancy_start"]

    def __str__(self) -> str:
        return f"{self.zone} {self.occupancy_start:%Y-%m-%d %H:%M}: {self.rate_before:.1f} → {self.rate_after:.1f} min/K"


class NodeCommand(models.Model):
    """A command queued for an HTTP node to pick up (node_queue actuators)."""

    node = models.ForeignKey(
        "sensors.Node", on_delete=models.CASCADE, related_name="control_commands"
    )
    actuator = models.ForeignKey(Actuator, on_delete=models.CASCADE, related_name="node_commands")
    command = models.ForeignKey(
        ActuatorCommand, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    state = models.BooleanField()
    created = models.DateTimeField(default=timezone.now)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    superseded = models.BooleanField(
        default=False, help_text="A newer command for the same actuator replaced this one."
    )

    class Meta:
        ordering = ["created"]
        indexes = [models.Index(fields=["node", "acknowledged_at", "superseded"])]

    def __str__(self) -> str:
        return f"{self.actuator} {'ON' if self.state else 'OFF'} for {self.node}"
