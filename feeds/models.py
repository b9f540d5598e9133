"""The Feed: a fixed-interval series stored as a PHPFina file pair under BMS_FEED_DIR.

Only configuration lives in the database; data points live in `<id>.dat` and recent
points and the last value in Redis (see feeds/store/phpfina.py and feeds/store/buffer.py).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

# Feeds the site's BACnet device shows (control/bacnet_server.py): a bound on its objects and
# on each refresh's work; a head-end browses them all in one go.
MAX_BACNET_FEEDS = 200


class Feed(models.Model):
    name = models.CharField(max_length=100, help_text="e.g. 'pv:power' or 'Room 1 temperature'")
    tag = models.CharField(max_length=100, blank=True, help_text="Group in lists, e.g. the node")
    unit = models.CharField(max_length=16, blank=True, help_text="W, kWh, °C, m/s ...")
    interval = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(86400)],
        help_text="Seconds between slots in the file (fixed once data is written).",
    )
    public = models.BooleanField(
        default=False, help_text="Readable without login (kiosk displays, public API)."
    )
    description = models.TextField(blank=True)
    bacnet_export = models.BooleanField(
        default=False,
        verbose_name="show on BACnet",
        help_text=(
            "Shown as an analog-input of the site's BACnet device (docs/BACNET.md section 7); "
            f"at most {MAX_BACNET_FEEDS} feeds."
        ),
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tag", "name"]
        constraints = [models.UniqueConstraint(fields=["tag", "name"], name="feed_unique_tag_name")]

    def clean(self) -> None:
        super().clean()
        if self.bacnet_export:
            others = Feed.objects.filter(bacnet_export=True).exclude(pk=self.pk)
            if others.count() >= MAX_BACNET_FEEDS:
                raise ValidationError(
                    {
                        "bacnet_export": f"At most {MAX_BACNET_FEEDS} feeds are shown on "
                        "BACnet: untick another first."
                    }
                )

    def __str__(self) -> str:
        return f"{self.tag}:{self.name}" if self.tag else self.name
