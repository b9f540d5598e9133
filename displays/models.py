"""Public kiosk displays and the panels on them."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from feeds.models import Feed
from sensors.models import Site


class Display(models.Model):
    class Theme(models.TextChoices):
        DARK = "dark", "Dark (high contrast)"
        LIGHT = "light", "Light"

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="displays", null=True, blank=True
    )
    slug = models.SlugField(unique=True, help_text="The screen's address: /kiosk/<slug>/")
    title = models.CharField(max_length=100)
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.DARK)
    refresh_s = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3600)],
        help_text="Data poll (s).",
    )
    rotate_s = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(5), MaxValueValidator(3600)],
        help_text="Seconds shown when rotating between displays.",
    )
    public = models.BooleanField(default=True, help_text="Visible without login.")

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class Panel(models.Model):
    class Kind(models.TextChoices):
        LIVE_VALUE = "live_value", "Live value (power now)"
        ENERGY_TODAY = "energy_today", "Energy today (kWh)"
        CHART_24H = "chart_24h", "24-hour chart"
        DAILY_7 = "daily_7", "Daily energy, 7 days"
        DAILY_30 = "daily_30", "Daily energy, 30 days"
        PEAK_TODAY = "peak_today", "Peak today"
        CO2_SAVED = "co2_saved", "CO₂ saved"
        TEMPERATURES = "temperatures", "Temperatures"
        HYDRO = "hydro", "Hydro flow and output"
        # A building's figures from the energy app (options.building: its MeterNode id).
        BUILDING_TODAY = "building_today", "Building energy today against the model"
        BUILDING_SAVED = "building_saved", "Building CO₂ saved against the model"
        # Generation by source -> the site's use -> grid in/out (options.roles: feed -> role).
        ENERGY_FLOW = "energy_flow", "Site energy flow"

    display = models.ForeignKey(Display, on_delete=models.CASCADE, related_name="panels")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    feeds = models.ManyToManyField(Feed, related_name="panels", blank=True)
    label = models.CharField(max_length=100)
    unit = models.CharField(max_length=16, blank=True)
    colour = models.CharField(
        max_length=7, default="#f5c400", help_text="Hex colour, e.g. #f5c400."
    )
    order = models.PositiveSmallIntegerField(default=0)
    options = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["display", "order", "id"]

    def __str__(self) -> str:
        return f"{self.display.slug}: {self.label}"

    def clean(self) -> None:
        import re

        from displays.options import validate_options

        errors: dict[str, list[str]] = {}
        if not re.fullmatch(r"#[0-9a-fA-F]{6}", self.colour or ""):
            errors["colour"] = ["Use a hex colour like #f5c400."]
        option_errors = validate_options(self.kind, self.options, strict=True)
        if not option_errors and self.kind in BUILDING_KINDS:
            option_errors = _check_building(self.options.get("building"), self.display)
        if option_errors:
            errors["options"] = option_errors
        if errors:
            raise ValidationError(errors)


BUILDING_KINDS = {Panel.Kind.BUILDING_TODAY, Panel.Kind.BUILDING_SAVED}


def _check_building(node_id: int, display: Display | None) -> list[str]:
    """The building a panel shows must exist, be a building, and be at the display's site."""
    from energy.models import MeterNode  # displays sit above energy: this way round only

    node = MeterNode.objects.filter(pk=node_id).select_related("site").first()
    if node is None:
        return [f"options.building: no metering node {node_id}."]
    if node.kind != MeterNode.Kind.BUILDING:
        return [f"options.building: '{node.name}' is a {node.kind}, not a building."]
    if display is not None and display.site_id is not None and node.site_id != display.site_id:
        return [f"options.building: '{node.name}' is at another site than the display."]
    return []
