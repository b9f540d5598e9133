"""Zones, schedules, bookings, overrides and the actuator command audit log."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.dates import span_text, when_text
from core.hosts import validate_host
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
        for other in SchedulePeriod.objects.filter(schedule_id=self.schedule_id).exclude(
            pk=self.pk
        ):
            if self.overlaps(other):
                raise ValidationError(self.overlap_message(other))

    def overlaps(self, other: SchedulePeriod) -> bool:
        """Whether the two periods share a minute of the week. Across midnight a period meets
        the next day's (and Sunday's meets Monday's): compared on the week as a circle. Also
        used by the staff schedule form on periods not yet saved."""
        week = 7 * 1440
        start, end = self.week_minutes()
        o_start, o_end = other.week_minutes()
        return any(start < o_end + shift and o_start + shift < end for shift in (-week, 0, week))

    def overlap_message(self, other: SchedulePeriod) -> str:
        return f"This period overlaps {other} on the same schedule; periods must not overlap."


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
    # BACnet has no authentication: a write from the network is a command from whoever can send
    # a UDP packet to the plant LAN, so each kind is refused until an engineer enables it here.
    bacnet_setpoint_writable = models.BooleanField(
        "BACnet setpoint writes accepted",
        default=False,
        help_text="Accept BACnet writes of this zone's setpoint (analog-value): each becomes an "
        "audited override with an expiry. Off: refused.",
    )
    bacnet_occupancy_writable = models.BooleanField(
        "BACnet occupancy writes accepted",
        default=False,
        help_text="Accept BACnet writes of this zone's occupancy (binary-value): each becomes an "
        "audited override with an expiry. Off: refused.",
    )

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
        """No file paths, no other schemes, no host inside the server or its LAN: the
        URL is typed by an engineer and fetched by the server.
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
    return float(settings.BMS_BOOKING_MAX_DAYS)


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
    # Bookers may move anyone's booking (docs/CONTROL.md): who last did, and when, is kept so
    # a change by someone other than the booker leaves a trace.
    changed_by = models.CharField(
        max_length=150, blank=True, help_text="Who last moved or renamed it (staff page or admin)."
    )
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["start"]
        indexes = [models.Index(fields=["zone", "start", "end"])]

    def __str__(self) -> str:
        local = timezone.localtime
        return f"{self.title} {span_text(local(self.start), local(self.end))}"

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


# The longest manual override (API, admin and staff page alike): it must end by itself.
MAX_OVERRIDE = timedelta(days=14)


class HeldQuerySet(models.QuerySet):
    def active(self, at=None) -> HeldQuerySet:
        """The holds in force at `at` (now): not cancelled, started, not yet expired; the same
        rule as HeldUntil.is_active, in the database."""
        at = at or timezone.now()
        return self.not_over(at).filter(starts__lte=at)

    def not_over(self, at=None) -> HeldQuerySet:
        """The holds not over at `at` (now): in force, or made to start later (the plant status
        page lists both)."""
        return self.filter(cancelled=False, expires__gt=at or timezone.now())


class HeldUntil(models.Model):
    """What a manual override of plant has, whatever it holds: a time it starts and one it
    ends by itself, why and who, and a cancellation that keeps the row (the audit trail)."""

    objects = HeldQuerySet.as_manager()

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
        abstract = True
        ordering = ["-starts"]

    def cancel(self, by: str) -> None:
        """Cancel, never delete: the audit trail keeps every override."""
        if self.cancelled:
            return
        self.cancelled, self.cancelled_at, self.cancelled_by = True, timezone.now(), by[:150]
        self.save(update_fields=["cancelled", "cancelled_at", "cancelled_by"])

    def is_active(self, at=None) -> bool:
        at = at or timezone.now()
        return not self.cancelled and self.starts <= at < self.expires


class Override(HeldUntil):
    """A manual override of an actuator (or all a zone's actuators) until it expires."""

    actuator = models.ForeignKey(
        Actuator, on_delete=models.CASCADE, null=True, blank=True, related_name="overrides"
    )
    zone = models.ForeignKey(
        Zone, on_delete=models.CASCADE, null=True, blank=True, related_name="overrides"
    )
    state = models.BooleanField(help_text="On (ticked) or off.")
    setpoint = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(5), MaxValueValidator(30)],
        help_text="°C a zone is held at (thermostat, frost and over-temperature still win); "
        "empty: the override forces its relays on or off.",
    )

    def __str__(self) -> str:
        target = self.actuator or self.zone
        held = (
            f"{self.setpoint:g} °C"
            if self.setpoint is not None
            else ("ON" if self.state else "OFF")
        )
        return f"{target} {held} until {when_text(timezone.localtime(self.expires))}"

    def clean(self) -> None:
        if (self.actuator_id is None) == (self.zone_id is None):
            raise ValidationError("An override applies to exactly one actuator or one zone.")
        if self.setpoint is not None:
            self._check_setpoint()
        if self.starts is not None and self.expires is not None and self.expires <= self.starts:
            raise ValidationError({"expires": "An override must expire after it starts."})
        if self.starts is not None and self.expires is not None:
            if self.expires - self.starts > MAX_OVERRIDE:
                # A forgotten override must end by itself (the staff page's bound, for all).
                raise ValidationError(
                    {"expires": f"An override may last at most {MAX_OVERRIDE.days} days."}
                )
        if self.actuator_id is not None:
            valve = (
                WeatherCompensation.objects.filter(
                    Q(open_actuator_id=self.actuator_id) | Q(close_actuator_id=self.actuator_id)
                )
                .select_related("plant")
                .first()
            )
            if valve is not None:
                # The valve driver owns both relays (the interlock keeps one off while the
                # other pulses); an override there was accepted and silently did nothing.
                raise ValidationError(
                    {
                        "actuator": "This relay drives the three-point valve of heating plant "
                        f"'{valve.plant.name}': overrides do not apply to it; override the "
                        "plant's output instead."
                    }
                )

    def _check_setpoint(self) -> None:
        """A held setpoint stays inside the zone's own limits: above where frost protection
        stops and below the over-temperature cut-off (those limits still win at the tick)."""
        if self.zone_id is None:
            raise ValidationError({"setpoint": "Only a zone override holds a setpoint."})
        zone = self.zone
        if not zone.frost_off <= self.setpoint < zone.max_temperature:
            raise ValidationError(
                {
                    "setpoint": f"Must be from the zone's frost-off {zone.frost_off:g} °C to "
                    f"below its cut-off of {zone.max_temperature:g} °C."
                }
            )


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
        return f"{self.actuator} {'ON' if self.state else 'OFF'} @ {when_text(timezone.localtime(self.requested_at))}"

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
    flow_sensor = models.ForeignKey(
        Sensor,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Flow temperature after the mixing valve: flow frost protection, and the "
        "mixing loop of weather compensation.",
    )
    # Read by no control loop: with the flow it gives the circuit's flow-return ΔT, which the
    # findings judge (findings/plant_checks.py, "low flow-return ΔT").
    return_sensor = models.ForeignKey(
        Sensor,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Return temperature of the circuit (optional): with the flow sensor, the "
        "findings judge its flow-return ΔT. No control reads it.",
    )
    flow_frost_c = models.FloatField(
        default=5.0,
        validators=[MinValueValidator(0), MaxValueValidator(15)],
        help_text="Plant frost protection below this flow temperature (°C; Siemens: 5).",
    )
    sensor_stale_after_s = models.PositiveIntegerField(
        default=900,
        validators=[MinValueValidator(30), MaxValueValidator(86400)],
        help_text="Outside and flow readings older than this are lost (s): alarm and the "
        "documented fallback. A flow sensor posting every 10 s is lost long before 15 min; "
        "until then the mixing loop steers on its last value.",
    )
    index_zone = models.ForeignKey(
        Zone,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The index circuit: its room drives the heating curve's room influence and "
        "its valves are held open for a plant without a bypass. Empty: the first zone by name.",
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
        from control.plant_rules import index_zone_problem, member_zone_ids

        problem = index_zone_problem(self.index_zone_id, member_zone_ids(self))
        if problem:
            raise ValidationError({"index_zone": problem})
        from control.claims import conflict

        for name in ("boiler", "pump"):
            actuator = getattr(self, name) if getattr(self, f"{name}_id") else None
            problem = conflict([actuator], plant_id=self.pk, claimant="plant")
            if problem:
                raise ValidationError({name: problem})


MODBUS_MAX = 65535


BACNET_ANALOGUE = ("analog-output", "analog-value")


class WeatherCompensation(models.Model):
    """A plant's heating curve and where its output goes: a holding register (a 0-10 V /
    4-20 mA output module) or a three-point valve (two relays). See control/engine/weather.py."""

    class Mode(models.TextChoices):
        MIXING_VALVE = "mixing_valve", "Mixing valve (PI loop on the flow temperature)"
        BOILER_SETPOINT = "boiler_setpoint", "Modulating boiler (flow set point)"

    class Output(models.TextChoices):
        REGISTER = "register", "Holding register (analogue output module)"
        THREE_POINT = "three_point", "Three-point valve (open / close relays)"
        BACNET = "bacnet", "BACnet analogue output (priority array)"

    plant = models.OneToOneField(HeatingPlant, on_delete=models.CASCADE, related_name="weather")
    enabled = models.BooleanField(default=True)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.MIXING_VALVE)
    slope = models.FloatField(
        default=1.5,
        validators=[MinValueValidator(0.2), MaxValueValidator(4.0)],
        help_text="K of flow per K the outside is below the room set point (Siemens: 0.25-4).",
    )
    shift_k = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(-10), MaxValueValidator(10)],
        help_text="Parallel shift of the curve (K).",
    )
    room_influence = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0), MaxValueValidator(10)],
        help_text="K of flow per K the index room is below its set point (0: none).",
    )
    flow_min_c = models.FloatField(
        default=20.0, validators=[MinValueValidator(5), MaxValueValidator(60)]
    )
    flow_max_c = models.FloatField(
        default=75.0,
        validators=[MinValueValidator(20), MaxValueValidator(95)],
        help_text="Highest flow set point (underfloor heating: 45-50 °C).",
    )
    flow_limit_c = models.FloatField(
        default=85.0,
        validators=[MinValueValidator(25), MaxValueValidator(110)],
        help_text="Flow over-temperature (°C): the mixing valve closes until below it by the band.",
    )
    kp = models.FloatField(
        default=4.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(100)],
        help_text="Mixing loop gain (% valve per K).",
    )
    ti_s = models.FloatField(
        default=180.0,
        validators=[MinValueValidator(10), MaxValueValidator(3600)],
        help_text="Mixing loop integral time (s).",
    )
    output = models.CharField(max_length=16, choices=Output.choices, default=Output.REGISTER)
    register_host = models.CharField(max_length=255, blank=True, validators=[validate_host])
    register_port = models.PositiveIntegerField(
        default=502, validators=[MinValueValidator(1), MaxValueValidator(MODBUS_MAX)]
    )
    register_device_id = models.PositiveIntegerField(default=1, validators=[MaxValueValidator(247)])
    register_address = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MODBUS_MAX)],
        help_text="Holding register, 0-based.",
    )
    raw_min = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MODBUS_MAX)],
        help_text="Raw counts at the bottom of the scale (0 V / 4 mA).",
    )
    raw_max = models.PositiveIntegerField(
        default=10000,
        validators=[MaxValueValidator(MODBUS_MAX)],
        help_text="Raw counts at the top of the scale (10 V / 20 mA).",
    )
    scale_low = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(-50), MaxValueValidator(150)],
        help_text="Value (% valve or °C set point) at raw min.",
    )
    scale_high = models.FloatField(
        default=100.0,
        validators=[MinValueValidator(-50), MaxValueValidator(150)],
        help_text="Value (% valve or °C set point) at raw max.",
    )
    open_actuator = models.ForeignKey(
        Actuator, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    close_actuator = models.ForeignKey(
        Actuator, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # A BACnet controller's analog-output or analog-value (the old BMS's valve or boiler set
    # point): written at a priority, read back, relinquished when released (docs/BACNET.md).
    bacnet_device = models.ForeignKey(
        "sensors.BacnetDevice",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="For a BACnet output: the controller that owns it.",
    )
    bacnet_object = models.CharField(
        max_length=40,
        blank=True,
        help_text="For a BACnet output: 'analog-output,1' (or an analog-value), written in the "
        "output's own unit (% valve or °C set point).",
    )
    bacnet_priority = models.PositiveSmallIntegerField(
        default=8,
        validators=[MinValueValidator(1), MaxValueValidator(16)],
        help_text="Priority-array slot we write (1 highest … 16 lowest; 8 is 'manual operator'). "
        "Released, it is set to NULL so the controller's own logic takes over.",
    )
    run_time_s = models.FloatField(
        default=120.0,
        validators=[MinValueValidator(10), MaxValueValidator(900)],
        help_text="Valve full stroke time (s).",
    )
    min_pulse_s = models.FloatField(
        default=2.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(60)],
        help_text="Shortest pulse (s): smaller corrections wait (deadband).",
    )

    def __str__(self) -> str:
        return f"Weather compensation of {self.plant}"

    def save(self, *args, **kwargs) -> None:
        self.register_host = (self.register_host or "").strip().lower()  # one spelling
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.flow_min_c >= self.flow_max_c:
            errors["flow_max_c"] = "The highest flow set point must be above the lowest."
        elif self.flow_max_c >= self.flow_limit_c:
            errors["flow_limit_c"] = "The over-temperature limit must be above the highest flow."
        if self.output == self.Output.REGISTER:
            if not self.register_host:
                errors["register_host"] = "A holding register output needs its module's host."
            if self.raw_min == self.raw_max:
                errors["raw_max"] = "Raw min and raw max must differ."
            if self.scale_low >= self.scale_high:
                errors["scale_high"] = "The top of the scale must be above its bottom."
            if self.register_host and "register_address" not in errors:
                from control.claims import register_conflict

                problem = register_conflict(
                    self.register_host,
                    self.register_port,
                    self.register_device_id,
                    self.register_address,
                    plant_id=self.plant_id,
                )
                if problem:
                    errors["register_address"] = problem
        elif self.output == self.Output.BACNET:
            errors.update(self._check_bacnet())
        else:
            if self.mode == self.Mode.BOILER_SETPOINT:
                errors["output"] = (
                    "A boiler flow set point needs a holding register or BACnet output."
                )
            elif not self.open_actuator_id or not self.close_actuator_id:
                errors["open_actuator"] = "A three-point valve needs an open and a close relay."
            elif self.open_actuator_id == self.close_actuator_id:
                errors["close_actuator"] = "The close relay must differ from the open relay."
            elif (
                self.min_pulse_s is not None
                and self.run_time_s is not None
                and (self.min_pulse_s >= self.run_time_s / 2)
            ):
                # A shortest pulse of half the stroke or more leaves the valve two positions.
                errors["min_pulse_s"] = (
                    f"The shortest pulse must be under half the valve's run time "
                    f"({self.run_time_s:g} s)."
                )
            else:
                errors.update(self._check_relays())
        plant = self._plant()
        if plant is not None:
            if self.mode == self.Mode.MIXING_VALVE and plant.flow_sensor_id is None:
                errors["mode"] = "A mixing valve loop needs the plant's flow sensor."
            if plant.outside_sensor_id is None:
                errors["plant"] = "Weather compensation needs the plant's outside sensor."
        if errors:
            raise ValidationError(errors)

    def _check_bacnet(self) -> dict[str, str]:
        from sensors.devices.bacnet_client import parse_object

        if self.bacnet_device_id is None:
            return {"bacnet_device": "A BACnet output needs its controller."}
        try:
            kind, instance = parse_object(self.bacnet_object)
        except ValueError as exc:
            return {"bacnet_object": str(exc)}
        if kind not in BACNET_ANALOGUE:
            return {"bacnet_object": f"Only {' and '.join(BACNET_ANALOGUE)} carry this output."}
        self.bacnet_object = f"{kind},{instance}"
        other = (
            WeatherCompensation.objects.filter(
                output=self.Output.BACNET,
                bacnet_device_id=self.bacnet_device_id,
                bacnet_object=self.bacnet_object,
            )
            .exclude(plant_id=self.plant_id)
            .select_related("plant")
            .first()
        )
        if other is not None:
            return {
                "bacnet_object": f"{self.bacnet_object} is already the output of heating plant "
                f"'{other.plant.name}'."
            }
        return {}

    def _plant(self) -> HeatingPlant | None:
        """The plant, also an unsaved one (the admin's inline validates with its parent)."""
        try:
            return self.plant
        except HeatingPlant.DoesNotExist:
            return None

    def _check_relays(self) -> dict[str, str]:
        opening, closing = self.open_actuator, self.close_actuator
        if (opening.host, opening.port, opening.device_id) != (
            closing.host,
            closing.port,
            closing.device_id,
        ) or opening.driver != Actuator.Driver.MODBUS_COIL:
            # The interlock (the other relay off, read back, before one is energised) needs
            # both coils on one Modbus board.
            return {"close_actuator": "Both relays must be Modbus coils of one board and unit."}
        plant = self._plant()
        if plant is not None and {opening.pk, closing.pk} & {plant.boiler_id, plant.pump_id}:
            return {"open_actuator": "The valve's relays must not be the plant's boiler or pump."}
        from control.claims import conflict

        for name in ("open_actuator", "close_actuator"):
            problem = conflict([getattr(self, name)], plant_id=self.plant_id, claimant="plant")
            if problem:
                return {name: problem}
        return {}


class RelayBoard(models.Model):
    """A Modbus relay board's own communication watchdog: a holding register written at start,
    after the board comes back, and every `rewrite_s`; the board drops its outputs (its own safe
    state) when the master stays silent longer than the timeout the register sets."""

    name = models.CharField(max_length=100, unique=True)
    host = models.CharField(max_length=255, validators=[validate_host])
    port = models.PositiveIntegerField(
        default=502, validators=[MinValueValidator(1), MaxValueValidator(MODBUS_MAX)]
    )
    device_id = models.PositiveIntegerField(default=1, validators=[MaxValueValidator(247)])
    watchdog_register = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(MODBUS_MAX)],
        help_text="Holding register of the watchdog (0-based); empty: the board has none.",
    )
    watchdog_value = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(MODBUS_MAX)],
        help_text="Value written (usually the timeout, in the board's unit: see its manual).",
    )
    rewrite_s = models.PositiveIntegerField(
        default=300,
        validators=[MinValueValidator(10), MaxValueValidator(86400)],
        help_text="Written again this often (s), and after the board comes back.",
    )
    enabled = models.BooleanField(default=True)
    # A coil past the board's last relay is written and read back by some boards without error
    # (or refused only at the first tick): the actuator looked configured and switched nothing.
    coil_count = models.PositiveIntegerField(
        default=16,
        validators=[MinValueValidator(1), MaxValueValidator(MODBUS_MAX + 1)],
        help_text="Relays (coils) on this board, numbered from 0; a coil beyond is refused.",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "port", "device_id"], name="relay_board_one_per_address"
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.host:
            from control.claims import board_conflict

            problem = board_conflict(self.host, self.port, self.device_id, board_id=self.pk)
            if problem:
                raise ValidationError({"host": problem})
        if self.host and self.watchdog_register is not None:
            from control.claims import register_conflict

            problem = register_conflict(
                self.host, self.port, self.device_id, self.watchdog_register, board_id=self.pk
            )
            if problem:
                raise ValidationError({"watchdog_register": problem})
        if self.host and self.coil_count:
            from control.board_coils import actuators_beyond

            problem = actuators_beyond(self)
            if problem:
                raise ValidationError({"coil_count": problem})

    def save(self, *args, **kwargs) -> None:
        self.host = (self.host or "").strip().lower()  # one spelling, as Actuator.host
        super().save(*args, **kwargs)


class AnalogueCommand(models.Model):
    """Audit log of a weather-compensated plant's output: every register write with its reason
    (three-point pulses are ActuatorCommand rows of their relays)."""

    # PROTECT, as ActuatorCommand: the audit trail outlives no plant it describes.
    plant = models.ForeignKey(HeatingPlant, on_delete=models.PROTECT, related_name="outputs")
    value = models.FloatField()
    unit = models.CharField(max_length=4)
    raw = models.IntegerField(null=True, blank=True)
    reason = models.TextField()
    strategy = models.CharField(max_length=64, blank=True)
    # Who, for a manual override's rows (as ActuatorCommand.user).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now, db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at"]

    def __str__(self) -> str:
        return f"{self.plant} {self.value:.1f} {self.unit} @ {self.requested_at:%Y-%m-%d %H:%M:%S}"


OUTPUT_OVERRIDE_MAX = timedelta(hours=24)
OUTPUT_OVERRIDE_MIN = timedelta(minutes=1)


class OutputOverride(HeldUntil):
    """An operator holds a weather-compensated plant's analogue output (a mixing valve's
    position, or a modulating boiler's flow set point) for a bounded time, with a reason.

    Frost protection and the flow over-temperature limit still win (control/engine/evaluator.py);
    it ends by itself at `expires`; it is cancelled, never deleted (the audit trail)."""

    plant = models.ForeignKey(
        HeatingPlant, on_delete=models.CASCADE, related_name="output_overrides"
    )
    value = models.FloatField(
        help_text="Valve position (%: 0 closed, 100 open) for a mixing valve; flow set point "
        "(°C) for a modulating boiler."
    )

    def __str__(self) -> str:
        until = when_text(timezone.localtime(self.expires)) if self.expires else "?"
        return f"{self.plant} output held at {self.value:g} until {until}"

    def unit(self) -> str:
        w = self._weather()
        return "°C" if w is not None and w.mode == WeatherCompensation.Mode.BOILER_SETPOINT else "%"

    def _weather(self) -> WeatherCompensation | None:
        try:
            return self.plant.weather if self.plant_id else None
        except WeatherCompensation.DoesNotExist:
            return None

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if not (self.reason or "").strip():
            errors["reason"] = "Say why the output is held (it is in every audit row)."
        w = self._weather()
        if self.plant_id is None or w is None or not w.enabled:
            errors["plant"] = "Only a plant with weather compensation enabled has an output."
        elif self.value is not None:
            if w.mode == WeatherCompensation.Mode.BOILER_SETPOINT:
                low, high, unit = w.flow_min_c, w.flow_max_c, "°C"
            else:
                low, high, unit = 0.0, 100.0, "%"
            if not low <= self.value <= high:
                errors["value"] = f"Must be from {low:g} to {high:g} {unit}."
        if self.starts is not None and self.expires is not None:
            length = self.expires - self.starts
            if length < OUTPUT_OVERRIDE_MIN:
                errors["expires"] = "Must be at least 1 minute after the start."
            elif length > OUTPUT_OVERRIDE_MAX:
                errors["expires"] = "Must be at most 24 hours after the start."
        if errors:
            raise ValidationError(errors)


DELTA_OFF_ABOVE_ON = (
    "The pump must go off at a smaller difference than the one it comes on at "
    "(the collector's lead over the tank)."
)
ANTIFREEZE_OFF_BELOW_ON = "Collector frost protection must end above the temperature it starts at."


class SolarCircuit(models.Model):
    """A solar thermal circuit: collector and tank sensors, one pump (differential control)."""

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="solar_circuits", null=True, blank=True
    )
    name = models.CharField(max_length=100, unique=True)
    collector_sensor = models.ForeignKey(Sensor, on_delete=models.PROTECT, related_name="+")
    tank_sensor = models.ForeignKey(Sensor, on_delete=models.PROTECT, related_name="+")
    pump = models.ForeignKey(Actuator, on_delete=models.PROTECT, related_name="+")
    # Bounds as RESOL DeltaSol sets them (ΔT on 1–20 K, tank maximum 4–95 °C, collector
    # emergency stop 80–200 °C), so the staff page, the admin and the API refuse alike.
    delta_on = models.FloatField(
        default=6.0,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="Pump on at collector − tank ≥ this (K).",
    )
    delta_off = models.FloatField(
        default=4.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(19.5)],
        help_text="Pump off at collector − tank ≤ this (K).",
    )
    tank_max = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(4), MaxValueValidator(95)],
        help_text="Tank maximum (°C).",
    )
    tank_hysteresis = models.FloatField(
        default=2.0, validators=[MinValueValidator(0.1), MaxValueValidator(20)]
    )
    collector_emergency = models.FloatField(
        default=130.0,
        validators=[MinValueValidator(80), MaxValueValidator(200)],
        help_text="Collector emergency stop (°C).",
    )
    emergency_hysteresis = models.FloatField(
        default=10.0, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    antifreeze_on = models.FloatField(
        default=4.0,
        validators=[MinValueValidator(-40), MaxValueValidator(8)],
        help_text="Collector antifreeze below (°C): circulate tank heat.",
    )
    antifreeze_off = models.FloatField(
        default=5.0, validators=[MinValueValidator(-39), MaxValueValidator(9)]
    )
    sensor_stale_after_s = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(30), MaxValueValidator(86400)]
    )
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
        # Worded as the staff page labels the fields ("Pump on when the collector is this much
        # warmer than the tank", "Collector frost protection below"), not as ΔT on/off.
        if self.delta_off >= self.delta_on:
            raise ValidationError({"delta_off": DELTA_OFF_ABOVE_ON})
        if self.antifreeze_off <= self.antifreeze_on:
            raise ValidationError({"antifreeze_off": ANTIFREEZE_OFF_BELOW_ON})
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
        return f"{self.zone} {when_text(timezone.localtime(self.occupancy_start))}: {self.rate_before:.1f} → {self.rate_after:.1f} min/K"


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


# --- site calendars: closures and special days shared by many schedules (issue #28) ----------

# Bounds on what a staff page may store: one entry spans at most a year (a closure, a term), a
# calendar holds at most this many entries (a decade of holidays and closures), so expanding a
# schedule's days for the calendar or a tick stays small.
CALENDAR_ENTRY_MAX_DAYS = 366
CALENDAR_MAX_ENTRIES = 500


class SiteCalendar(models.Model):
    """A named list of closures and special days (the site's public holidays, a term calendar),
    shared by every schedule that uses it: set Christmas once, not once per schedule."""

    name = models.CharField(max_length=100, unique=True)
    country = models.CharField(
        max_length=2,
        blank=True,
        default="GB",
        help_text="ISO country code whose public holidays are offered (the `holidays` library).",
    )
    subdivision = models.CharField(
        max_length=8, blank=True, help_text="Region of the country, e.g. WLS for Wales."
    )
    schedules = models.ManyToManyField(Schedule, blank=True, related_name="calendars")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CalendarEntry(models.Model):
    """A closure (unoccupied every day from first_day to last_day) or a special day (occupied
    from start to end on each of those days), replacing the weekly periods of every schedule
    that uses the calendar. A schedule's own exception day wins over a calendar's entry."""

    calendar = models.ForeignKey(SiteCalendar, on_delete=models.CASCADE, related_name="entries")
    first_day = models.DateField()
    last_day = models.DateField(help_text="Inclusive: the same as the first day for one day.")
    description = models.CharField(max_length=200)
    occupied = models.BooleanField(
        default=False, help_text="Unticked: closed (unoccupied). Ticked: occupied start to end."
    )
    start = models.TimeField(null=True, blank=True)
    end = models.TimeField(null=True, blank=True)

    class Meta:
        ordering = ["calendar", "first_day"]
        indexes = [models.Index(fields=["calendar", "first_day", "last_day"])]

    def __str__(self) -> str:
        if self.first_day == self.last_day:
            return f"{self.description} ({self.first_day:%a %d %b %Y})"
        return f"{self.description} ({self.first_day:%a %d %b} – {self.last_day:%a %d %b %Y})"

    def days(self) -> int:
        return (self.last_day - self.first_day).days + 1

    def clean(self) -> None:
        errors = {}
        if self.first_day and self.last_day:
            if self.last_day < self.first_day:
                errors["last_day"] = "Must not be before the first day."
            elif self.days() > CALENDAR_ENTRY_MAX_DAYS:
                errors["last_day"] = f"An entry may span at most {CALENDAR_ENTRY_MAX_DAYS} days."
        if self.occupied:
            if self.start is None or self.end is None:
                errors["start"] = "An occupied special day needs a start and an end time."
            elif self.start == self.end:
                errors["end"] = "It must not end when it starts (before the start: the next day)."
        if self.calendar_id is not None and self.pk is None:
            if self.calendar.entries.count() >= CALENDAR_MAX_ENTRIES:
                errors["calendar"] = (
                    f"A calendar holds at most {CALENDAR_MAX_ENTRIES} entries: remove old ones."
                )
        if errors:
            raise ValidationError(errors)


class ProgrammeChange(models.Model):
    """The audit of a change to a schedule, a calendar, which rooms follow a schedule (staff
    pages), a heating plant (with its weather compensation), a solar circuit or a heat main
    (staff pages, REST API and admin: control/change_audit.py): who, when, what and why (the
    rows themselves keep no history)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    by = models.CharField(max_length=150)
    subject = models.CharField(max_length=200, help_text="What was changed, e.g. schedule 'Term'.")
    change = models.TextField(help_text="What changed, in words.")
    reason = models.CharField(max_length=200)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.subject}: {self.change[:60]} ({self.by})"


class WindowDetection(models.Model):
    """Open-window detection of a zone (control/engine/open_window.py): a fall in the room's
    temperature while it heats, or a window contact, stops the zone's heating for a while.
    Off without a row; a row starts from these defaults (docs/CONTROL.md "Open windows")."""

    class ContactOpen(models.IntegerChoices):
        ONE = 1, "reads 1 when open"
        ZERO = 0, "reads 0 when open"

    zone = models.OneToOneField(Zone, on_delete=models.CASCADE, related_name="window_detection")
    enabled = models.BooleanField(default=True)
    detect_drop = models.BooleanField(
        default=True, help_text="Detect an open window from a temperature drop while heating."
    )
    # 0.5 K in 5 min is 6 K/h: twice Versatile Thermostat's suggested 3 °C/h, as this is read
    # from raw readings (0.1 K steps) rather than a smoothed slope.
    drop_k = models.FloatField(
        default=0.5,
        validators=[MinValueValidator(0.2), MaxValueValidator(5.0)],
        help_text="Fall in room temperature (K) that means a window is open…",
    )
    drop_minutes = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(60)],
        help_text="…within this many minutes, while the zone calls for heat.",
    )
    pause_min = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(5), MaxValueValidator(240)],
        help_text="Heating stops this long after a drop, then resumes on its own.",
    )
    contact_sensor = models.ForeignKey(
        Sensor,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="A window contact: heating stops while it reads open.",
    )
    contact_open = models.PositiveSmallIntegerField(
        choices=ContactOpen.choices, default=ContactOpen.ONE
    )

    class Meta:
        verbose_name = "open-window detection"
        verbose_name_plural = "open-window detection"

    def __str__(self) -> str:
        return f"Open-window detection of {self.zone}"


class HeatMain(models.Model):
    """A heat main fed by several heat sources in lead/lag sequence (control/engine/heat_main.py;
    defaults from Siemens RVD/Desigo cascades, docs/CONTROL.md "Heat main")."""

    site = models.ForeignKey(
        Site, on_delete=models.SET_NULL, null=True, blank=True, related_name="heat_mains"
    )
    name = models.CharField(max_length=100, unique=True)
    zones = models.ManyToManyField(Zone, blank=True, related_name="heat_mains")
    flow_sensor = models.ForeignKey(
        Sensor, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="The main's flow temperature: what the sequence stages on.",
    )  # fmt: skip
    flow_setpoint_c = models.FloatField(
        default=75.0, validators=[MinValueValidator(30), MaxValueValidator(95)]
    )
    stage_up_k = models.FloatField(
        default=5.0, validators=[MinValueValidator(0.5), MaxValueValidator(30)],
        help_text="The next source starts when the flow is this far below the set point…",
    )  # fmt: skip
    stage_up_s = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(60), MaxValueValidator(7200)],
        help_text="…for this long (s).",
    )  # fmt: skip
    stage_down_k = models.FloatField(
        default=5.0, validators=[MinValueValidator(0.5), MaxValueValidator(30)],
        help_text="The last source stops when the flow is this far above the set point…",
    )  # fmt: skip
    stage_down_s = models.PositiveIntegerField(
        default=300, validators=[MinValueValidator(60), MaxValueValidator(7200)],
        help_text="…for this long (s).",
    )  # fmt: skip
    rotate_weekly = models.BooleanField(default=True, help_text="Change the lead every week.")
    rotate_hours = models.FloatField(
        default=0.0, validators=[MinValueValidator(0), MaxValueValidator(10000)],
        help_text="Change the lead when its run hours exceed the least run source's by this "
        "(0: off).",
    )  # fmt: skip
    sensor_stale_after_s = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(60), MaxValueValidator(86400)]
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class HeatSource(models.Model):
    """A heat source on a heat main: a boiler's relay. Its minimum run / off times are its
    actuator's (a biomass boiler: hours)."""

    heat_main = models.ForeignKey(HeatMain, on_delete=models.CASCADE, related_name="sources")
    name = models.CharField(max_length=100)
    actuator = models.ForeignKey(Actuator, on_delete=models.PROTECT, related_name="+")
    order = models.PositiveSmallIntegerField(default=1, help_text="Lowest leads (before rotation).")
    rotate = models.BooleanField(
        default=True, help_text="Takes part in the lead rotation (a biomass base load may not)."
    )
    ramp_s = models.PositiveIntegerField(
        default=120, validators=[MaxValueValidator(4 * 3600)],
        help_text="After it starts, no further stage is judged until it has run this long "
        "(a biomass boiler: 30–60 min).",
    )  # fmt: skip

    class Meta:
        ordering = ["heat_main", "order", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["actuator"], name="heat_source_one_actuator")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.heat_main})"

    def clean(self) -> None:
        from control.claims import conflict

        if self.actuator_id is not None:
            # A source's relay driven by a zone, a plant or a solar circuit as well would be
            # switched by two rules each tick.
            problem = conflict([self.actuator], claimant="heat source", heat_source_id=self.pk)
            if problem:
                raise ValidationError({"actuator": problem})


class ThermalStore(models.Model):
    """A heat main's thermal store (control/engine/thermal_store.py): charged from the main's
    sources by its top and bottom temperatures, discharged to the main's zones. Solar thermal
    feeds it through a solar circuit whose tank sensor is the store's bottom sensor."""

    heat_main = models.OneToOneField(HeatMain, on_delete=models.CASCADE, related_name="store")
    name = models.CharField(max_length=100)
    top_sensor = models.ForeignKey(Sensor, on_delete=models.PROTECT, related_name="+")
    bottom_sensor = models.ForeignKey(Sensor, on_delete=models.PROTECT, related_name="+")
    charge_start_c = models.FloatField(
        default=55.0, validators=[MinValueValidator(20), MaxValueValidator(90)],
        help_text="Charge when the top falls below this…",
    )  # fmt: skip
    charge_stop_c = models.FloatField(
        default=70.0, validators=[MinValueValidator(25), MaxValueValidator(95)],
        help_text="…until the bottom reaches this.",
    )  # fmt: skip
    discharge_min_c = models.FloatField(
        default=60.0, validators=[MinValueValidator(20), MaxValueValidator(95)],
        help_text="The store serves the main's zones while its top is at least this.",
    )  # fmt: skip
    charge_pump = models.ForeignKey(
        Actuator, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    discharge_pump = models.ForeignKey(
        Actuator, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    sensor_stale_after_s = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(60), MaxValueValidator(86400)]
    )

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.charge_stop_c <= self.charge_start_c:
            raise ValidationError(
                {"charge_stop_c": "The bottom must reach above where the top starts a charge."}
            )
        if self.charge_pump_id and self.charge_pump_id == self.discharge_pump_id:
            raise ValidationError(
                {"discharge_pump": "The discharge pump must be another relay than the charge pump."}
            )
        from control.claims import conflict

        for field in ("charge_pump", "discharge_pump"):
            pump = getattr(self, field) if getattr(self, f"{field}_id") else None
            problem = conflict([pump], claimant="thermal store", store_id=self.pk)
            if problem:
                raise ValidationError({field: problem})
