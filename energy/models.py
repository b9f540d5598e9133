"""The metering tree and the site energy model (docs/ENERGY.md).

Site (sensors.Site) -> MeterNode (building, floor, room, circuit ...) -> Meter. A meter reads a
feed (a cumulative register or a power feed) or is virtual: a signed sum of other meters kept
as VirtualTerm rows. MeterDay caches each meter's use per local day (energy/refresh.py fills
it from the feeds); ExpectedUse is the site's energy model, per building, fuel and period.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from energy import benchmarks
from energy.consumption import ESTIMATED, FIRST_DATE, GAP, LAST_DATE, MEASURED
from energy.degree_days import DEFAULT_BASE_C
from feeds.models import Feed
from sensors.models import Site

FUEL_CHOICES = [(f, f) for f in benchmarks.FUELS]
MAX_TREE_DEPTH = 8
MAX_TERMS = 50
MAX_AREA_M2 = 10_000_000
HOURS_A_YEAR = 8784  # a leap year
PV, HYDRO, WIND = "pv", "hydro", "wind"
GENERATOR_CHOICES = [(PV, "solar PV array"), (HYDRO, "hydro turbine"), (WIND, "wind turbine")]


class EnergySite(models.Model):
    """Energy settings of a site: where its outside temperature comes from."""

    site = models.OneToOneField(Site, on_delete=models.CASCADE, related_name="energy")
    outside_temperature_feed = models.ForeignKey(
        Feed, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Outside air temperature (°C) for heating degree days.",
    )  # fmt: skip
    hdd_base_c = models.FloatField(
        default=DEFAULT_BASE_C,
        validators=[MinValueValidator(-10), MaxValueValidator(30)],
        help_text="Base temperature of heating degree days (UK convention 15.5 °C).",
    )
    currency = models.CharField(max_length=3, default="GBP")
    grid_carbon_feed = models.ForeignKey(
        Feed, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Grid carbon intensity (g CO₂e/kWh) of electricity, e.g. from a grid "
                  "operator's feed; days it covers use its daily mean.",
    )  # fmt: skip

    def __str__(self) -> str:
        return f"energy settings of {self.site}"


class GridCarbonPeriod(models.Model):
    """Grid electricity's emission factor over a period of days (a table, e.g. one row per
    year of the published national factor, or per month of a supplier's fuel mix)."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="grid_carbon")
    start = models.DateField()
    end = models.DateField(help_text="Last day of the period (inclusive).")
    g_per_kwh = models.FloatField(
        validators=[MinValueValidator(0), MaxValueValidator(2000)],
        help_text="g CO₂e per kWh of grid electricity.",
    )

    class Meta:
        ordering = ["site", "start"]
        constraints = [
            models.UniqueConstraint(fields=["site", "start"], name="gridcarbon_site_start")
        ]

    def __str__(self) -> str:
        return f"{self.site} {self.start}..{self.end}: {self.g_per_kwh} g/kWh"

    def clean(self) -> None:
        if self.start and self.end and self.end < self.start:
            raise ValidationError({"end": "must not be before start"})
        if self.start and self.end and self.site_id:
            clash = GridCarbonPeriod.objects.filter(
                site_id=self.site_id, start__lte=self.end, end__gte=self.start
            ).exclude(pk=self.pk)
            if clash.exists():
                raise ValidationError({"start": f"overlaps the period {clash.first()}"})


MAX_RECIPIENTS_PER_SITE = 50


class ReportRecipient(models.Model):
    """Who gets the monthly report: of one building (node) or of every building of a site."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="report_recipients")
    node = models.ForeignKey(
        "MeterNode", null=True, blank=True, on_delete=models.CASCADE,
        related_name="report_recipients",
        help_text="A building; blank: every building of the site.",
    )  # fmt: skip
    email = models.EmailField(max_length=254)

    class Meta:
        ordering = ["site", "email"]
        constraints = [
            models.UniqueConstraint(fields=["site", "node", "email"], name="reportrecipient_unique")
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.node or self.site})"

    def clean(self) -> None:
        errors = {}
        if self.node_id is not None and self.site_id is not None:
            if self.node.site_id != self.site_id:
                errors["node"] = f"'{self.node}' belongs to another site"
            elif self.node.kind != MeterNode.Kind.BUILDING:
                errors["node"] = f"'{self.node}' is a {self.node.kind}, not a building"
        if self.site_id is not None:
            others = ReportRecipient.objects.filter(site_id=self.site_id).exclude(pk=self.pk)
            # the database's unique constraint does not see two rows with no node as equal
            if others.filter(node_id=self.node_id, email__iexact=self.email).exists():
                errors["email"] = f"{self.email} is already a recipient here"
            elif others.count() >= MAX_RECIPIENTS_PER_SITE:
                errors["email"] = f"a site has at most {MAX_RECIPIENTS_PER_SITE} report recipients"
        if errors:
            raise ValidationError(errors)


class FuelRate(models.Model):
    """Tariff and emission factor of one fuel at one site (defaults: energy/benchmarks.py)."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="fuel_rates")
    fuel = models.CharField(max_length=16, choices=FUEL_CHOICES)
    price_per_unit = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0), MaxValueValidator(1000)],
        help_text="Money per kWh (water: per m³).",
    )
    kg_co2e_per_unit = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(10)],
        help_text="Blank: the DESNZ 2023 default for the fuel (docs/ENERGY.md).",
    )  # fmt: skip

    class Meta:
        constraints = [models.UniqueConstraint(fields=["site", "fuel"], name="fuelrate_site_fuel")]

    def __str__(self) -> str:
        return f"{self.site} {self.fuel}"

    @property
    def factor(self) -> float:
        if self.kg_co2e_per_unit is not None:
            return self.kg_co2e_per_unit
        return benchmarks.DEFAULT_FACTORS[self.fuel]


class MeterNode(models.Model):
    class Kind(models.TextChoices):
        BUILDING = "building"
        FLOOR = "floor"
        ROOM = "room"
        CIRCUIT = "circuit"
        PLANT = "plant"
        OTHER = "other"

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="meter_nodes")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.BUILDING)
    floor_area_m2 = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(MAX_AREA_M2)],
        help_text="Gross internal floor area (buildings): kWh/m² and the DEC rating.",
    )  # fmt: skip
    tm46_category = models.CharField(
        max_length=32, blank=True, choices=benchmarks.TM46_CHOICES,
        help_text="CIBSE TM46 benchmark category (buildings).",
    )  # fmt: skip
    annual_occupancy_hours = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(HOURS_A_YEAR)],
        help_text="Hours a year the building is occupied, counted as TM46 counts them for its "
        "category (offices, laboratories, workshops, storage: hours with over 25 % of the "
        "nominal maximum occupants; the others: hours fully open to the public). Longer than "
        "the category's standard hours raises its DEC benchmark; blank: standard hours.",
    )  # fmt: skip
    baseline_start = models.DateField(null=True, blank=True)
    baseline_end = models.DateField(
        null=True, blank=True, help_text="Last day of the baseline (the performance line)."
    )

    class Meta:
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "parent", "name"], name="meternode_unique")
        ]

    def __str__(self) -> str:
        return self.name

    def building(self) -> MeterNode | None:
        """This node if it is a building, else its nearest building above it."""
        node, depth = self, 0
        while node is not None and depth <= MAX_TREE_DEPTH:
            if node.kind == self.Kind.BUILDING:
                return node
            node, depth = node.parent, depth + 1
        return None

    def _orphaned_separable_errors(self) -> dict[str, str]:
        """A change of kind or parent must not leave a separable meter below this node outside
        every building: its use would silently stop being taken out of a DEC rating (found by
        an outside check). Meters under a building below this node are not affected."""
        if self.building() is not None:
            return {}
        orphaned, level = [], [self.pk]
        for _depth in range(MAX_TREE_DEPTH + 1):
            if not level:
                break
            orphaned += [
                f"'{m.name}' ({m.separable_use})"
                for m in Meter.objects.filter(node_id__in=level).exclude(separable_use="")
            ]
            level = list(
                MeterNode.objects.filter(parent_id__in=level)
                .exclude(kind=self.Kind.BUILDING)
                .values_list("pk", flat=True)
            )
        if not orphaned:
            return {}
        stored = MeterNode.objects.filter(pk=self.pk).values_list("kind", flat=True).first()
        field = "kind" if stored != self.kind else "parent"
        return {
            field: f"separable meter(s) {', '.join(sorted(orphaned)[:5])} would no longer be in "
            "a building: clear their separable use or move them first"
        }

    def clean(self) -> None:
        errors = {}
        if self.parent_id is not None:
            parent = self.parent
            if parent.site_id != self.site_id:
                errors["parent"] = f"'{parent}' belongs to another site"
            seen, node, depth = {self.pk}, parent, 1
            while node is not None:
                if node.pk in seen and node.pk is not None:
                    errors["parent"] = f"'{parent}' is inside '{self}': the tree would loop"
                    break
                seen.add(node.pk)
                depth += 1
                node = node.parent
            if depth > MAX_TREE_DEPTH and "parent" not in errors:
                errors["parent"] = f"the tree may be at most {MAX_TREE_DEPTH} levels deep"
        if self.baseline_start and self.baseline_end and self.baseline_end < self.baseline_start:
            errors["baseline_end"] = "must not be before baseline_start"
        if self.pk is not None and not errors:
            errors.update(self._orphaned_separable_errors())
        if self.annual_occupancy_hours is not None:
            bench = benchmarks.TM46_TYPICAL.get(self.tm46_category)
            if self.kind != self.Kind.BUILDING or bench is None:
                errors["annual_occupancy_hours"] = (
                    "only a building with a TM46 category has occupancy hours"
                )
            elif bench.hours_standard is None:
                errors["annual_occupancy_hours"] = (
                    f"TM46 does not adjust '{bench.label}' for occupancy hours: leave blank"
                )
        if errors:
            raise ValidationError(errors)


class Meter(models.Model):
    class Source(models.TextChoices):
        CUMULATIVE = "cumulative", "cumulative register (kWh, water m³)"
        POWER = "power", "power (W), integrated over time"
        VIRTUAL = "virtual", "virtual: sum and difference of other meters"

    node = models.ForeignKey(MeterNode, on_delete=models.CASCADE, related_name="meters")
    name = models.CharField(max_length=100)
    fuel = models.CharField(max_length=16, choices=FUEL_CHOICES)
    source = models.CharField(max_length=16, choices=Source.choices)
    feed = models.ForeignKey(
        Feed, null=True, blank=True, on_delete=models.SET_NULL, related_name="energy_meters"
    )
    counts_to_node = models.BooleanField(
        default=True,
        help_text="Adds to its node's total (untick for a sub-meter used only in a virtual).",
    )
    max_fill_hours = models.PositiveIntegerField(
        default=48, validators=[MaxValueValidator(744)],
        help_text="Holes in the data up to this long are filled and shown as estimated.",
    )  # fmt: skip
    separable_use = models.CharField(
        max_length=100, blank=True,
        help_text="The TM46 separable energy use this meter measures on its own (e.g. "
        "'regional server room'): its use is taken out of its building's for the DEC rating "
        "only. Blank for an ordinary meter.",
    )  # fmt: skip
    # What a generation meter measures, so the findings rules know a PV array from a hydro
    # turbine (docs/FINDINGS.md): PV arrays are judged against their own clear-day envelope
    # and their sibling arrays, a turbine against the water it is given.
    generator = models.CharField(
        max_length=16, blank=True, choices=GENERATOR_CHOICES,
        help_text="Generation meters: what generates (PV arrays are compared with each other, "
        "a hydro turbine with its flow). Blank for other meters.",
    )  # fmt: skip
    flow_feed = models.ForeignKey(
        Feed, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Hydro: the feed of the river or intake flow (or level) that drives it; "
        "output absent while it shows water is a finding.",
    )  # fmt: skip

    class Meta:
        ordering = ["node__name", "name"]
        constraints = [models.UniqueConstraint(fields=["node", "name"], name="meter_unique")]

    def __str__(self) -> str:
        return self.name

    @property
    def unit(self) -> str:
        return benchmarks.UNIT[self.fuel]

    def feed_unit_error(self) -> str | None:
        """Why the feed's unit does not fit this meter (an outside temperature feed in °C on
        an electricity register), or None. An empty unit is accepted (docs/ENERGY.md)."""
        if self.source == self.Source.VIRTUAL or self.feed_id is None or not self.fuel:
            return None
        allowed = benchmarks.feed_units(self.fuel, self.source)
        unit = self.feed.unit or ""
        if not unit.strip() or benchmarks.normal_unit(unit) in allowed:
            return None
        said = {"kwh": "kWh", "wh": "Wh", "m³": "m³", "m3": "m3", "w": "W", "kw": "kW"}
        return (
            f"'{self.feed}' is in {unit!r}: a {self.source} {self.fuel} meter reads a feed in "
            f"{' or '.join(said[u] for u in allowed)} (or with no unit set)"
        )

    @property
    def feed_scale(self) -> float:
        """Factor from the feed's unit to kWh (water: m³) for a register, to W for power."""
        if self.feed_id is None or self.source == self.Source.VIRTUAL:
            return 1.0
        allowed = benchmarks.feed_units(self.fuel, self.source)
        return allowed.get(benchmarks.normal_unit(self.feed.unit or ""), 1.0)

    def clean(self) -> None:
        errors = {}
        if self.source == self.Source.VIRTUAL and self.feed_id is not None:
            errors["feed"] = "a virtual meter has terms, not a feed"
        if self.source != self.Source.VIRTUAL and self.feed_id is None:
            errors["feed"] = f"a {self.source} meter needs a feed"
        if self.source == self.Source.POWER and self.fuel == benchmarks.WATER:
            errors["source"] = "water is metered by a cumulative register (m³), not power"
        if "feed" not in errors and "source" not in errors:
            unit_error = self.feed_unit_error()
            if unit_error:
                errors["feed"] = unit_error
        if self.separable_use.strip():
            errors.update(self._separable_errors())
        if self.generator and self.fuel != benchmarks.GENERATION:
            errors["generator"] = f"only a generation meter says what generates, not {self.fuel}"
        if self.flow_feed_id is not None and self.generator != HYDRO:
            errors["flow_feed"] = "only a hydro generator has a flow feed"
        if errors:
            raise ValidationError(errors)

    def _separable_errors(self) -> dict[str, str]:
        """TM46: a separable use is metered on its own, is energy, and is inside a building."""
        if self.fuel not in benchmarks.TM46_CLASS:
            return {"separable_use": f"{self.fuel} is not energy use of a building (TM46)"}
        if self.source == self.Source.VIRTUAL:
            return {"separable_use": "TM46 takes out only a separately metered use: not a "
                    "virtual meter"}  # fmt: skip
        if self.node_id is not None and self.node.building() is None:
            return {"separable_use": f"'{self.node}' is not in a building"}
        return {}


class VirtualTerm(models.Model):
    meter = models.ForeignKey(Meter, on_delete=models.CASCADE, related_name="terms")
    source = models.ForeignKey(Meter, on_delete=models.PROTECT, related_name="used_in")
    sign = models.SmallIntegerField(choices=[(1, "+"), (-1, "−")], default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["meter", "source"], name="virtualterm_unique")
        ]

    def __str__(self) -> str:
        return f"{'+' if self.sign > 0 else '−'} {self.source}"


class MeterDay(models.Model):
    """A meter's use on one local day: value None exactly when status is gap."""

    STATUS_CHOICES = [(MEASURED, MEASURED), (ESTIMATED, ESTIMATED), (GAP, GAP)]
    meter = models.ForeignKey(Meter, on_delete=models.CASCADE, related_name="days")
    day = models.DateField()
    value = models.FloatField(null=True)
    status = models.CharField(max_length=10, choices=STATUS_CHOICES)
    # kg CO2e of the day's use at the site's grid carbon feed, hour by hour (each hour's use x
    # that hour's intensity; energy/grid_carbon.py), for meters of electricity quantity. Null:
    # no grid carbon feed, the feed covers under 75 % of the day, or the day is a gap; the
    # figures then use the day's factor from the period table or the constant.
    grid_kg_co2e = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["meter", "day"], name="meterday_unique")]


class ExpectedUse(models.Model):
    """The site energy model: expected use of a building and fuel over [start, end] (days)."""

    node = models.ForeignKey(MeterNode, on_delete=models.CASCADE, related_name="expected")
    fuel = models.CharField(max_length=16, choices=FUEL_CHOICES)
    start = models.DateField()
    end = models.DateField(help_text="Last day of the period (inclusive).")
    value = models.FloatField(validators=[MinValueValidator(0), MaxValueValidator(1e12)])

    class Meta:
        ordering = ["node__name", "fuel", "start"]
        constraints = [
            models.UniqueConstraint(fields=["node", "fuel", "start"], name="expected_unique")
        ]

    def __str__(self) -> str:
        return f"{self.node} {self.fuel} {self.start}..{self.end}"

    def clean(self) -> None:
        for field in ("start", "end"):  # the days the rest of the module can hold
            value = getattr(self, field)
            if value and not FIRST_DATE <= value <= LAST_DATE:
                raise ValidationError({field: f"{value} is outside {FIRST_DATE}..{LAST_DATE}"})
        if self.start and self.end and self.end < self.start:
            raise ValidationError({"end": "must not be before start"})
        if self.start and self.end and (self.end - self.start).days > 366:
            raise ValidationError({"end": "a model period is at most a year"})
        # the site energy model is per building: a room's row would never be read
        if self.node_id and self.node.kind != MeterNode.Kind.BUILDING:
            raise ValidationError(
                {"node": f"'{self.node}' is a {self.node.kind}: the model is per building"}
            )
