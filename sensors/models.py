"""Sites, nodes (devices that post readings), sensors (one measured quantity each),
actuators (things we switch) and alarms."""

from __future__ import annotations

import ipaddress
import logging
import math
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as ResolveTimeout
from dataclasses import dataclass
from typing import Self

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from core.dates import DEFAULT_TIME_ZONE
from core.hosts import validate_host
from feeds.models import Feed
from sensors import brick, keys
from sensors.sensor_params import param_errors

MODBUS_MAX_ADDRESS = 65535
MODBUS_MAX_DEVICE_ID = 247
MODBUS_MAX_BLOCK = 125  # the protocol's limit for one FC3/FC4 request
MODBUS_DEFAULT_BLOCK = 120
MODBUS_MAX_METERS_PER_BUS = 32
log = logging.getLogger(__name__)

MODBUS_MAX_REGISTERS_PER_METER = 200  # bounds one poll's requests and its time  # RS-485 unit loads without a repeater, and one poll's time budget


class Site(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(unique=True)
    latitude = models.FloatField(
        default=52.62, validators=[MinValueValidator(-90), MaxValueValidator(90)]
    )
    longitude = models.FloatField(
        default=-3.84, validators=[MinValueValidator(-180), MaxValueValidator(180)]
    )
    time_zone = models.CharField(max_length=64, default=DEFAULT_TIME_ZONE)
    grid_intensity_g_per_kwh = models.FloatField(
        default=207.0,
        validators=[MinValueValidator(0)],
        help_text="Grid carbon intensity used for 'CO₂ saved' (UK 2024 average ≈ 207 g/kWh).",
    )
    description = models.TextField(blank=True)
    # Bounded so a typo cannot turn the bound off in practice (1 TiB of history per site).
    history_budget_mb = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(1_048_576)],
        help_text="MB of feed data this site's history (readings older than its nodes' first) "
        "may add; empty: BMS_SITE_HISTORY_BUDGET_MB. Raise it before importing months of "
        "history (docs/MOVING_FROM_EMONCMS.md).",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(self.time_zone)
        # OSError: a directory name ("Europe") or a name longer than the file system allows.
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
            raise ValidationError({"time_zone": f"Unknown time zone '{self.time_zone}'."}) from exc


# Node names as emoncms allows them (letters and numbers of any script, `_`, whitespace, `-`,
# `.`): emonhub sends `emon.pi` or a name with a space unchanged, and a gateway key creates the
# node under the name it was sent with (sensors/ingest/emoncms_input.py).
node_name_validator = RegexValidator(
    r"^[\w\s.\-]+$",
    "Use letters, digits, '_', '-', '.' and spaces (emoncms's node name characters).",
)

# A serial device path: under /dev, no "..", nothing a shell or a path join could misread.
serial_port_validator = RegexValidator(
    r"^/dev/(?!.*\.\.)[A-Za-z0-9_./:+-]{1,190}$",
    "A serial device under /dev, e.g. /dev/ttyUSB0 or /dev/serial/by-id/usb-...",
)


class WriteKeyHolder:
    """A write key kept as a short lookup prefix and a hash (sensors/keys.py): node keys and
    gateway keys alike. The model has `key_prefix`, `key_hash` and `enabled` fields."""

    key_prefix: str
    key_hash: str

    def set_new_key(self) -> str:
        """A fresh write key; returned once (the only time it is visible), only its hash kept."""
        key = keys.generate_key()
        self.key_prefix = keys.key_prefix(key)
        self.key_hash = keys.hash_key(key)
        return key

    def check_key(self, key: str) -> bool:
        return bool(self.key_hash) and keys.key_matches(key, self.key_hash)

    @classmethod
    def for_key(cls, key: str) -> Self | None:
        """The enabled holder of this write key, or None."""
        if len(key) != keys.KEY_LENGTH:
            return None
        holders = cls.objects.filter(key_prefix=keys.key_prefix(key), enabled=True)  # type: ignore[attr-defined]
        for holder in holders:
            if holder.check_key(key):
                return holder
        return None


class Node(WriteKeyHolder, models.Model):
    class Protocol(models.TextChoices):
        EMONCMS = "emoncms", "emonTx / emonPi / emonhub (HTTP)"
        HTTP = "http", "HTTP JSON (REST readings API)"
        JEELIB = "jeelib", "JeeLib RFM12B/RFM69 radio via gateway"
        LLAP = "llap", "Ciseco LLAP radio via gateway"
        MODBUS = "modbus", "Modbus meter, TCP or RTU (polled)"
        BACNET = "bacnet", "BACnet/IP controller (polled)"
        MQTT = "mqtt", "MQTT (emonhub topics)"

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="nodes", null=True, blank=True
    )
    # Names and radio ids are unique per site (Meta.constraints): two buildings may each have
    # an emonTx on radio id 10, and a gateway key resolves a ref within its own site.
    name = models.CharField(
        max_length=64,
        validators=[node_name_validator],
        help_text="The node name used by emoncms/emonhub (the `node` parameter), e.g. 'emontx1'.",
    )
    node_id = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(255)],
        help_text="Radio node id (JeeLib/emonhub node number); posts may use it instead of the name.",
    )
    protocol = models.CharField(max_length=16, choices=Protocol.choices, default=Protocol.EMONCMS)
    location = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    interval = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1)],
        help_text="Expected seconds between posts; silent for 3× this raises an alarm.",
    )
    enabled = models.BooleanField(default=True)
    key_prefix = models.CharField(max_length=keys.PREFIX_LENGTH, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    # Modbus meters: where to poll (register map in ModbusRegister). A TCP meter has a host; an
    # RTU meter names the RS-485 bus it shares with other meters (sensors/devices/modbus_meters.py).
    modbus_host = models.CharField(max_length=255, blank=True, validators=[validate_host])
    modbus_bus = models.ForeignKey(
        "ModbusBus",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="meters",
        help_text="The RS-485 bus of a Modbus RTU meter (leave the host empty).",
    )
    modbus_max_block = models.PositiveIntegerField(
        default=MODBUS_DEFAULT_BLOCK,
        validators=[MinValueValidator(1), MaxValueValidator(MODBUS_MAX_BLOCK)],
        help_text="Most registers the meter answers in one request (its manual says; 1–125).",
    )
    modbus_port = models.PositiveIntegerField(
        default=502, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    modbus_device_id = models.PositiveIntegerField(
        default=1, validators=[MaxValueValidator(MODBUS_MAX_DEVICE_ID)]
    )
    created = models.DateTimeField(auto_now_add=True)
    # Registered by a gateway key's post rather than by a person: counted against the site's
    # bound of such nodes (BMS_INGEST_MAX_AUTO_NODES_PER_SITE, sensors/ingest/registration.py),
    # and judged silent together with the other nodes of its gateway (one alarm, not one each).
    auto_created = models.BooleanField(
        default=False,
        editable=False,
        help_text="Registered by a gateway key when it first posted for this node.",
    )
    registered_by = models.ForeignKey(
        "GatewayKey",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="registered_nodes",
        help_text="The gateway key whose post registered this node.",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "name"],
                name="node_unique_site_name",
                violation_error_message="This site already has a node of this name.",
            ),
            models.UniqueConstraint(
                fields=["site", "node_id"],
                name="node_unique_site_radio_id",
                violation_error_message="This site already has a node with this radio id.",
            ),
            # A NULL site is never equal to another in a unique index: nodes of no site are
            # held unique among themselves by these two.
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(site__isnull=True),
                name="node_unique_name_without_site",
                violation_error_message="A node of no site already has this name.",
            ),
            models.UniqueConstraint(
                fields=["node_id"],
                condition=models.Q(site__isnull=True),
                name="node_unique_radio_id_without_site",
                violation_error_message="A node of no site already has this radio id.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.protocol != self.Protocol.MODBUS:
            return
        if self.modbus_host and self.modbus_bus_id:
            raise ValidationError(
                {"modbus_bus": "A Modbus meter is either TCP (a host) or RTU (a bus), not both."}
            )
        if not self.modbus_host and not self.modbus_bus_id:
            raise ValidationError(
                {"modbus_host": "A Modbus meter needs a host (TCP) or a bus (RTU) to poll."}
            )
        if self.modbus_bus_id:
            if not 1 <= self.modbus_device_id <= MODBUS_MAX_DEVICE_ID:
                raise ValidationError(
                    {"modbus_device_id": "An RTU meter's unit id is 1–247 (0 is broadcast)."}
                )
            others = Node.objects.filter(
                modbus_bus_id=self.modbus_bus_id, protocol=self.Protocol.MODBUS
            ).exclude(pk=self.pk)
            if others.filter(modbus_device_id=self.modbus_device_id).exists():
                raise ValidationError(
                    {"modbus_device_id": f"Unit id {self.modbus_device_id} is already on this bus."}
                )
            if others.count() >= MODBUS_MAX_METERS_PER_BUS:
                raise ValidationError(
                    {"modbus_bus": f"A bus holds at most {MODBUS_MAX_METERS_PER_BUS} meters."}
                )


class GatewayKey(WriteKeyHolder, models.Model):
    """A site's write key for a gateway (emonhub, an emonPi): posts for any node of its site.

    emonhub sends every radio node it hears in one bulk request with one key. A node key writes
    its own node only; a gateway key writes any node of its site and registers an unknown node
    or input as new (auto-created, within the site's bound: sensors/ingest/input_budget.py). Stored as
    a hash like node keys (sensors/keys.py); shown once when created or rotated."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="gateway_keys")
    name = models.CharField(max_length=100, help_text="Which gateway, e.g. 'emonPi, plant room'.")
    enabled = models.BooleanField(default=True)
    key_prefix = models.CharField(max_length=keys.PREFIX_LENGTH, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="gatewaykey_unique_site_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.site})"


class Sensor(models.Model):
    class Kind(models.TextChoices):
        GENERIC = "generic", "Generic (scale/offset)"
        TEMPERATURE = "temperature", "Temperature, already °C"
        RTD_PT100 = "rtd_pt100", "RTD PT100 (ohms)"
        RTD_PT1000 = "rtd_pt1000", "RTD PT1000 (ohms)"
        NTC_BETA = "ntc_beta", "NTC thermistor, Beta (ohms)"
        NTC_STEINHART = "ntc_steinhart", "NTC thermistor, Steinhart–Hart (ohms)"
        THERMOCOUPLE_K = "thermocouple_k", "Type K thermocouple (mV)"
        POWER = "power", "Power from CT (W)"
        ENERGY = "energy", "Energy (kWh)"
        PULSE = "pulse", "Pulse counter (counts since boot)"
        VOLTAGE = "voltage", "Voltage (V)"
        CURRENT = "current", "Current (A)"
        FLOW = "flow", "Flow"
        HUMIDITY = "humidity", "Humidity (%)"
        WIND_SPEED = "wind_speed", "Wind speed (m/s)"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="sensors")
    key = models.CharField(
        max_length=64, help_text="Input key or index as posted, e.g. 'power1' or '1'."
    )
    name = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.GENERIC)
    unit = models.CharField(max_length=16, blank=True)
    scale = models.FloatField(default=1.0, help_text="Calibration: value × scale + offset.")
    offset = models.FloatField(default=0.0)
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="Conversion parameters, e.g. {'pulses_per_unit': 1.25, 'counter_bits': 32} "
        "or {'r25': 10000, 'beta': 3950}.",
    )
    feed = models.ForeignKey(
        Feed, on_delete=models.SET_NULL, null=True, blank=True, related_name="sensors"
    )
    processes = models.JSONField(
        default=list,
        blank=True,
        help_text="Input process list, emoncms names: [{'process': 'log_to_feed', 'feed': 3}, ...]",
    )
    brick_class = models.CharField(
        max_length=48,
        blank=True,
        choices=[(c, c.replace("_", " ")) for c in brick.SENSOR_CHOICES],
        help_text="Brick class, only where its kind and its place in the site model do not say "
        "what it measures (a generic or pulse sensor): blank = derived (docs/BRICK.md).",
    )
    min_valid = models.FloatField(null=True, blank=True, help_text="Alarm below this value.")
    max_valid = models.FloatField(null=True, blank=True, help_text="Alarm above this value.")
    auto_created = models.BooleanField(
        default=False, help_text="Created when an unseen input arrived; needs configuring."
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["node__name", "key"]
        constraints = [
            models.UniqueConstraint(fields=["node", "key"], name="sensor_unique_node_key")
        ]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.key}" + (f" ({self.name})" if self.name else "")

    def clean(self) -> None:
        if (
            self.min_valid is not None
            and self.max_valid is not None
            and self.min_valid >= self.max_valid
        ):
            raise ValidationError({"max_valid": "Must be greater than the minimum valid value."})
        if not isinstance(self.params, dict):
            raise ValidationError({"params": "Must be a JSON object."})
        problems = param_errors(self.kind, self.params)
        if problems:  # each message names its key: "r0: must be a number, got 'abc'"
            raise ValidationError({"params": problems})
        if not isinstance(self.processes, list):
            raise ValidationError({"processes": "Must be a JSON list of process steps."})
        from sensors.process_validation import check_process_list, feed_field_error

        site_id = Node.objects.filter(pk=self.node_id).values_list("site_id", flat=True).first()
        if problem := feed_field_error(self.feed_id, site_id=site_id, sensor=self.pk):
            raise ValidationError({"feed": problem})
        steps, errors = check_process_list(self.processes, site_id=site_id, exclude_sensor=self.pk)
        if errors:
            raise ValidationError({"processes": errors})
        self.processes = steps  # emoncms ids turned into names


class PulseCounterState(models.Model):
    """A pulse counter's state, kept durably so its total survives a Redis that lost its data.

    Redis holds the live state (sensors:pulse:<id>); this row is written from it at most every
    PULSE_SAVE_S seconds of readings (sensors/ingest/processing.py). Restoring an older row loses
    nothing while the node has not rebooted since: the counter is cumulative, so the next
    count is differenced against the row's count.
    """

    sensor = models.OneToOneField(
        Sensor, on_delete=models.CASCADE, primary_key=True, related_name="pulse_state"
    )
    t = models.BigIntegerField(help_text="Unix time of the reading this state is after.")
    count = models.BigIntegerField(help_text="The raw count last accepted.")
    total = models.FloatField(help_text="Units counted since the sensor was created.")
    pending = models.BigIntegerField(
        null=True, blank=True, help_text="A count held as a possible glitch."
    )

    def __str__(self) -> str:
        return f"pulse state of sensor {self.sensor_id}: {self.total:g}"


class ModbusBus(models.Model):
    """An RS-485 line (a serial port) shared by Modbus RTU meters, polled in turn under one lock."""

    class Parity(models.TextChoices):
        NONE = "N", "None"
        EVEN = "E", "Even"
        ODD = "O", "Odd"

    BAUD_RATES = [1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200]

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="modbus_buses", null=True, blank=True
    )
    name = models.CharField(max_length=64, unique=True)
    port = models.CharField(
        max_length=200,
        validators=[serial_port_validator],
        help_text="The serial device, e.g. /dev/ttyUSB0 or /dev/serial/by-id/...",
    )
    baudrate = models.PositiveIntegerField(default=9600, choices=[(b, str(b)) for b in BAUD_RATES])
    parity = models.CharField(max_length=1, choices=Parity.choices, default=Parity.NONE)
    stopbits = models.PositiveSmallIntegerField(default=1, choices=[(1, "1"), (2, "2")])
    timeout = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.05), MaxValueValidator(10.0)],
        help_text="Seconds one request may take before it counts as unanswered (0.05–10).",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]
        # Django's default plural is "Modbus buss" (the admin's list title and menu).
        verbose_name = "Modbus bus"
        verbose_name_plural = "Modbus buses"

    def __str__(self) -> str:
        return f"{self.name} ({self.port} {self.baudrate} 8{self.parity}{self.stopbits})"

    def clean(self) -> None:
        # NaN passes the min/max validators (every comparison with it is false).
        if self.timeout is None or not math.isfinite(self.timeout):
            raise ValidationError({"timeout": "timeout is a number of seconds, 0.05–10."})


class EmoncmsOrigin(models.Model):
    """Which emoncms input or feed an object of ours was imported from (manage.py
    import_emoncms), so a second run updates what the first made instead of doubling it."""

    class Kind(models.TextChoices):
        FEED = "feed"
        INPUT = "input"

    source = models.CharField(
        max_length=100, help_text="Name of the emoncms site (import_emoncms --source)."
    )
    kind = models.CharField(max_length=8, choices=Kind.choices)
    emoncms_id = models.PositiveIntegerField()
    feed = models.ForeignKey(
        Feed, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    sensor = models.ForeignKey(
        Sensor, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    imported = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "kind", "emoncms_id"], name="emoncmsorigin_unique_id"
            )
        ]

    def __str__(self) -> str:
        return f"emoncms {self.source} {self.kind} {self.emoncms_id}"


class ModbusRegister(models.Model):
    """One value a Modbus meter node is polled for (sensors/devices/modbus_poll.py decodes it)."""

    class Function(models.TextChoices):
        INPUT = "input", "Input registers (FC4)"
        HOLDING = "holding", "Holding registers (FC3)"

    class DataType(models.TextChoices):
        INT16 = "int16"
        UINT16 = "uint16"
        INT32 = "int32"
        UINT32 = "uint32"
        INT64 = "int64"
        UINT64 = "uint64"
        FLOAT32 = "float32"
        FLOAT64 = "float64"

    class WordOrder(models.TextChoices):
        ABCD = "ABCD", "ABCD: big-endian, high word first"
        BADC = "BADC", "BADC: high word first, bytes swapped"
        CDAB = "CDAB", "CDAB: low word first (word-swapped)"
        DCBA = "DCBA", "DCBA: little-endian"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="registers")
    key = models.CharField(max_length=64, help_text="Input key the value is posted as.")
    address = models.PositiveIntegerField(validators=[MaxValueValidator(MODBUS_MAX_ADDRESS)])
    function = models.CharField(max_length=8, choices=Function.choices, default=Function.INPUT)
    data_type = models.CharField(max_length=8, choices=DataType.choices, default=DataType.FLOAT32)
    word_order = models.CharField(max_length=4, choices=WordOrder.choices, default=WordOrder.ABCD)
    scale = models.FloatField(default=1.0)
    offset = models.FloatField(default=0.0, help_text="Added after scaling: raw × scale + offset.")

    class Meta:
        ordering = ["node__name", "address"]
        constraints = [
            models.UniqueConstraint(fields=["node", "key"], name="register_unique_node_key")
        ]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.key} @{self.address}"

    def clean(self) -> None:
        from sensors.devices.modbus_maps import RegisterMapError, validate_row

        try:
            validate_row(
                {
                    "key": self.key,
                    "address": self.address,
                    "function": self.function,
                    "data_type": self.data_type,
                    "word_order": self.word_order,
                    "scale": self.scale,
                    "offset": self.offset,
                }
            )
        except RegisterMapError as exc:
            raise ValidationError({exc.field: exc.message}) from exc
        if not self.node_id:
            return
        others = ModbusRegister.objects.filter(node_id=self.node_id).exclude(pk=self.pk)
        if others.filter(key=self.key).exists():
            raise ValidationError({"key": f"This meter already has a register named {self.key!r}."})
        if self.pk is None and others.count() >= MODBUS_MAX_REGISTERS_PER_METER:
            raise ValidationError(
                {"node": f"A meter has at most {MODBUS_MAX_REGISTERS_PER_METER} registers."}
            )


# --- which board a host names ---------------------------------------------------------------
#
# Two actuators on one coil fight (the relay toggles every tick, each read back "confirmed"),
# and a board saved as "127.0.0.1" is the same board as "localhost", "127.1", "0x7f000001",
# "::ffff:127.0.0.1", "127.0.0.1." or "LOCALHOST". So the checks for a coil or register claimed
# twice compare what the host names: its addresses (IP literals normalised with ipaddress and
# the classic inet_aton forms; names resolved with a bounded timeout), not its spelling.

BOARD_RESOLVE_TIMEOUT_S = 2.0
# inet_aton's forms of an IPv4 address: 127.1, 0x7f000001, 2130706433, 0177.0.0.1.
_INET_ATON = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$")
_resolver = ThreadPoolExecutor(max_workers=4, thread_name_prefix="board-resolve")


@dataclass(frozen=True)
class BoardHost:
    """What a typed host names: its addresses, or (not resolved) only its normalised name."""

    name: str
    addresses: frozenset[str]

    @property
    def resolved(self) -> bool:
        return bool(self.addresses)

    def same(self, other: BoardHost) -> bool:
        if self.addresses and other.addresses:
            return bool(self.addresses & other.addresses)
        return self.name == other.name


def _address(value: str) -> str | None:
    """An IP literal in one spelling (an IPv4-mapped IPv6 address as its IPv4), else None."""
    try:
        ip = ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        if not _INET_ATON.match(value):
            return None
        try:
            return socket.inet_ntoa(socket.inet_aton(value))
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def board_host(host: str, timeout_s: float = BOARD_RESOLVE_TIMEOUT_S) -> BoardHost:
    name = (host or "").strip().lower().removesuffix(".")
    literal = _address(name)
    if literal is not None:
        return BoardHost(name, frozenset({literal}))
    if not name:
        return BoardHost(name, frozenset())
    future = _resolver.submit(socket.getaddrinfo, name, None, 0, socket.SOCK_STREAM)
    try:
        infos = future.result(timeout=timeout_s)
    except (OSError, ResolveTimeout, UnicodeError):
        log.warning("host %r could not be resolved in %.1f s: compared by name", name, timeout_s)
        return BoardHost(name, frozenset())
    found = {a for info in infos if (a := _address(str(info[4][0]))) is not None}
    return BoardHost(name, frozenset(found))


def same_board_hosts(host: str, others: dict[int, str]) -> tuple[list[int], BoardHost]:
    """Which of `others` (row id -> host) name the board `host` names, and what `host`
    names (say "compared by name" when it did not resolve). One lookup per distinct host."""
    mine = board_host(host)
    seen: dict[str, BoardHost] = {}
    same = []
    for pk, other in others.items():
        key = (other or "").strip().lower()
        if key not in seen:
            seen[key] = board_host(key)
        if mine.same(seen[key]):
            same.append(pk)
    return same, mine


def unresolved_note(host: BoardHost) -> str:
    if host.resolved or not host.name:
        return ""
    return f" ('{host.name}' could not be resolved: compared by name)"


BACNET_MAX_INSTANCE = 4194302  # 22 bits; 4194303 is the wildcard
BACNET_MAX_POINTS_PER_DEVICE = 200  # bounds one poll's requests and its time
BACNET_MAX_INTERVAL_S = 86400  # a day: beyond it the node's silent alarm means nothing
BACNET_MIN_INTERVAL_S = 5  # the fastest poll one controller is given: small ones serve one client
BACNET_MIN_TIMEOUT_S = 0.5  # seconds for each answer: a routed controller needs some
BACNET_MAX_TIMEOUT_S = 30.0  # beyond it one silent controller holds a poll worker too long
BACNET_POINT_TYPES = (
    "analog-input",
    "analog-output",
    "analog-value",
    "binary-input",
    "binary-output",
    "binary-value",
    "multi-state-input",
    "multi-state-output",
    "multi-state-value",
)


class BacnetDevice(models.Model):
    """A BACnet/IP controller we poll: its readings arrive as the node's inputs (keys of its
    points), so they are recorded, charted and used by control like any other reading."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="bacnet")
    address = models.CharField(
        max_length=64,
        help_text="Its BACnet/IP address, 'host' or 'host:port' (port 47808 when left out).",
    )
    device_instance = models.PositiveIntegerField(
        validators=[MaxValueValidator(BACNET_MAX_INSTANCE)],
        help_text="The device object's instance number, as its I-Am gave it.",
    )
    timeout_s = models.FloatField(
        default=3.0,
        validators=[
            MinValueValidator(BACNET_MIN_TIMEOUT_S),
            MaxValueValidator(BACNET_MAX_TIMEOUT_S),
        ],
        help_text="Seconds to wait for each answer.",
    )
    vendor_name = models.CharField(max_length=100, blank=True)

    def __str__(self) -> str:
        return f"{self.node.name} (device {self.device_instance} at {self.address})"

    def clean(self) -> None:
        from sensors.devices.bacnet_client import parse_address

        try:
            host, port = parse_address(self.address)
        except ValueError as exc:
            raise ValidationError({"address": str(exc)}) from exc
        # Two rows for one controller would poll it twice and record it under two nodes.
        others = BacnetDevice.objects.filter(device_instance=self.device_instance).exclude(
            pk=self.pk
        )
        for other in others.select_related("node"):
            try:
                same = parse_address(other.address) == (host, port)
            except ValueError:  # a row from before these checks: not ours to judge here
                continue
            if same:
                raise ValidationError(
                    {
                        "address": f"device {self.device_instance} at {host}:{port} is already "
                        f"recorded as {other}"
                    }  # fmt: skip
                )


class BacnetPoint(models.Model):
    """One object of a device, read as the node's input `key` each poll."""

    device = models.ForeignKey(BacnetDevice, on_delete=models.CASCADE, related_name="points")
    key = models.CharField(max_length=64, help_text="The input key its readings arrive as.")
    object_type = models.CharField(max_length=24, choices=[(t, t) for t in BACNET_POINT_TYPES])
    instance = models.PositiveIntegerField(validators=[MaxValueValidator(BACNET_MAX_INSTANCE)])
    name = models.CharField(max_length=100, blank=True)
    units = models.CharField(max_length=64, blank=True)
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["device", "object_type", "instance"]
        constraints = [
            models.UniqueConstraint(fields=["device", "key"], name="bacnet_point_key_once"),
            models.UniqueConstraint(
                fields=["device", "object_type", "instance"], name="bacnet_point_object_once"
            ),
        ]

    @property
    def ref(self) -> str:
        return f"{self.object_type},{self.instance}"

    def __str__(self) -> str:
        return f"{self.key} ({self.ref})"


# Checks an upper layer adds to Actuator.clean (control: a coil within its relay board's coil
# count, control/board_coils.py). This layer cannot import them, so they register here from
# their app's ready(); each returns {field: message} or {}.
ACTUATOR_CHECKS: list = []


MAX_MIN_TIME_S = 12 * 3600  # an actuator's minimum run or off time (anti-short-cycle)
# A multi-state point's state number we write: BACnet's is any Unsigned; real ones list a handful.
MAX_MULTI_STATE = 255


class Actuator(models.Model):
    class Kind(models.TextChoices):
        BOILER = "boiler"
        PUMP = "pump"
        VALVE = "valve"
        RADIATOR = "radiator", "Radiator valve"
        RELAY = "relay", "Generic relay"

    class Driver(models.TextChoices):
        MODBUS_COIL = "modbus_coil", "Modbus TCP coil"
        NODE_QUEUE = "node_queue", "HTTP node command queue"
        BACNET = "bacnet", "BACnet binary or multi-state output (priority array)"

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="actuators", null=True, blank=True
    )
    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.RELAY)
    driver = models.CharField(max_length=16, choices=Driver.choices, default=Driver.MODBUS_COIL)
    host = models.CharField(
        max_length=255,
        blank=True,
        help_text="Relay board address (Modbus).",
        validators=[validate_host],
    )
    port = models.PositiveIntegerField(
        default=502, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    device_id = models.PositiveIntegerField(
        default=1,
        validators=[MaxValueValidator(MODBUS_MAX_DEVICE_ID)],
        help_text="Modbus unit/device id (pymodbus device_id).",
    )
    coil = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(MODBUS_MAX_ADDRESS)],
        help_text="Coil address, 0–65535 (0-based protocol address).",
    )
    node = models.ForeignKey(
        Node,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="actuators",
        help_text="For the node command queue driver.",
    )
    bacnet_device = models.ForeignKey(
        BacnetDevice,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="actuators",
        help_text="For the BACnet driver: the controller that owns the output.",
    )
    bacnet_object = models.CharField(
        max_length=40,
        blank=True,
        help_text="For the BACnet driver: 'binary-output,1' (or a binary-value, or a "
        "multi-state-output/-value with the states written for ON and OFF below).",
    )
    # A multi-state point (an old controller's pump command Off/On/Auto, a boiler's stage)
    # driven ON/OFF: the state numbers (1-based, as its state-text lists them) we write for each.
    bacnet_on_state = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_MULTI_STATE)],
        help_text="For a BACnet multi-state output or value: the state written for ON "
        "(e.g. 2 'On').",
    )
    bacnet_off_state = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_MULTI_STATE)],
        help_text="For a BACnet multi-state output or value: the state written for OFF "
        "(e.g. 1 'Off').",
    )
    bacnet_priority = models.PositiveSmallIntegerField(
        default=8,
        validators=[MinValueValidator(1), MaxValueValidator(16)],
        help_text="Priority-array slot we write (1 highest … 16 lowest; 8 is 'manual operator'). "
        "Released, it is set to NULL so the controller's own logic takes over.",
    )
    # Anti-short-cycle, bounded: a biomass boiler runs hours at a time (the demo's: 2 h), but a
    # minimum beyond half a day is a typing slip that would hold plant on or off all day
    # (safety strategies still override it).
    min_on_s = models.PositiveIntegerField(
        default=600,
        validators=[MaxValueValidator(MAX_MIN_TIME_S)],
        help_text="Minimum run time (s).",
    )
    min_off_s = models.PositiveIntegerField(
        default=600,
        validators=[MaxValueValidator(MAX_MIN_TIME_S)],
        help_text="Minimum off time (s).",
    )
    feedback_sensor = models.ForeignKey(
        Sensor, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    enabled = models.BooleanField(default=True, help_text="Disabled actuators are never switched.")
    idle_state = models.BooleanField(
        default=False,
        help_text="State when no zone, plant, solar circuit or override drives it (ticked = ON). "
        "A relay removed from its zone, or of a disabled zone, is driven to this.",
    )
    description = models.TextField(blank=True)
    brick_class = models.CharField(
        max_length=48,
        blank=True,
        choices=[(c, c.replace("_", " ")) for c in brick.ACTUATOR_CHOICES],
        help_text="Brick class of what it switches, only where its kind does not say (a generic "
        "relay): blank = derived (docs/BRICK.md).",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            # Two enabled actuators on one coil fight: with opposite demands the relay flips
            # every tick. A disabled one is never switched, so it may stay as a
            # spare definition.
            models.UniqueConstraint(
                fields=["host", "port", "device_id", "coil"],
                condition=models.Q(driver="modbus_coil", enabled=True),
                name="actuator_one_per_modbus_coil",
                violation_error_message="Another enabled actuator already drives this coil.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # One spelling per board, so "Relay-1.local" and "relay-1.local " are one coil owner.
        self.host = (self.host or "").strip().lower()
        super().save(*args, **kwargs)

    def same_coil(self) -> models.QuerySet[Actuator]:
        """Other enabled Modbus actuators on this board, unit and coil: the board is what the
        host names (its resolved address), not how it is spelt (see `board_host`)."""
        return Actuator.objects.filter(pk__in=self._same_coil()[0])

    def _same_coil(self) -> tuple[list[int], BoardHost]:
        candidates = dict(
            Actuator.objects.filter(
                driver=self.Driver.MODBUS_COIL,
                enabled=True,
                port=self.port,
                device_id=self.device_id,
                coil=self.coil,
            )
            .exclude(pk=self.pk)
            .values_list("pk", "host")
        )
        return same_board_hosts(self.host, candidates)

    def _clean_bacnet(self) -> None:
        from sensors.devices.bacnet_client import (
            COMMANDABLE_BINARY,
            COMMANDABLE_MULTI_STATE,
            parse_object,
        )

        if self.bacnet_device_id is None:
            raise ValidationError({"bacnet_device": "A BACnet actuator needs its controller."})
        try:
            kind, instance = parse_object(self.bacnet_object)
        except ValueError as exc:
            raise ValidationError({"bacnet_object": str(exc)}) from exc
        if kind not in (*COMMANDABLE_BINARY, *COMMANDABLE_MULTI_STATE):
            raise ValidationError(
                {
                    "bacnet_object": f"Only {' and '.join(COMMANDABLE_BINARY)} (and, with "
                    f"the states written for ON and OFF, {' and '.join(COMMANDABLE_MULTI_STATE)})"
                    " are switched."
                }
            )
        self.bacnet_object = f"{kind},{instance}"
        self._clean_states(kind in COMMANDABLE_MULTI_STATE)
        if self.enabled:
            other = (
                Actuator.objects.filter(
                    driver=self.Driver.BACNET,
                    enabled=True,
                    bacnet_device_id=self.bacnet_device_id,
                    bacnet_object=self.bacnet_object,
                )
                .exclude(pk=self.pk)
                .first()
            )
            if other is not None:
                raise ValidationError(
                    {
                        "bacnet_object": f"{self.bacnet_object} of this controller is already "
                        f"driven by actuator '{other.name}' (id {other.pk}): two actuators on "
                        "one output would fight."
                    }
                )

    def _clean_states(self, multi_state: bool) -> None:
        """A multi-state point needs the two states we write, distinct; a binary one none (they
        would be ignored, and a reader would think them in use)."""
        states = {
            "bacnet_on_state": self.bacnet_on_state,
            "bacnet_off_state": self.bacnet_off_state,
        }
        if not multi_state:
            for field, value in states.items():
                if value is not None:
                    raise ValidationError({field: "Only for a multi-state output or value."})
            return
        for field, value in states.items():
            if value is None:
                raise ValidationError(
                    {field: f"A multi-state output needs the state written for "
                            f"{'ON' if field == 'bacnet_on_state' else 'OFF'} (1-{MAX_MULTI_STATE})."}
                )  # fmt: skip
            if not 1 <= value <= MAX_MULTI_STATE:
                raise ValidationError({field: f"A state is 1-{MAX_MULTI_STATE}, not {value}."})
        if self.bacnet_on_state == self.bacnet_off_state:
            raise ValidationError({"bacnet_off_state": "ON and OFF must write different states."})

    def clean(self) -> None:
        if self.coil is not None and not 0 <= self.coil <= MODBUS_MAX_ADDRESS:
            raise ValidationError(
                {"coil": f"Coil address {self.coil} is out of range 0–{MODBUS_MAX_ADDRESS}."}
            )
        if self.driver == self.Driver.MODBUS_COIL and not self.host:
            raise ValidationError({"host": "A Modbus coil actuator needs the relay board host."})
        if self.driver == self.Driver.NODE_QUEUE and self.node_id is None:
            raise ValidationError({"node": "A node-queue actuator needs the node it belongs to."})
        if self.driver == self.Driver.BACNET:
            self._clean_bacnet()
        for check in ACTUATOR_CHECKS:
            problem = check(self)
            if problem:
                raise ValidationError(problem)
        if self.driver == self.Driver.MODBUS_COIL and self.enabled:
            same, mine = self._same_coil()
            other = Actuator.objects.filter(pk__in=same).order_by("pk").first()
            if other is not None:
                alias = "" if other.host == mine.name else f" (as {other.host})"
                raise ValidationError(
                    {
                        "coil": f"Coil {self.coil} of unit {self.device_id} on "
                        f"{self.host.strip().lower()}:{self.port} is already driven by actuator "
                        f"'{other.name}' (id {other.pk}{alias}): two actuators on one coil "
                        f"would fight.{unresolved_note(mine)}"
                    }
                )
