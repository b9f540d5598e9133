"""The Feed: a fixed-interval series stored as a PHPFina file pair under BMS_FEED_DIR.

Only configuration lives in the database; data points live in `<id>.dat` and recent
points and the last value in Redis (see feeds/store/phpfina.py and feeds/store/buffer.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models, transaction

# Feeds the site's BACnet device shows (control/bacnet_server.py): a bound on its objects and
# on each refresh's work; a head-end browses them all in one go.
MAX_BACNET_FEEDS = 200
# The PostgreSQL advisory lock a change to a feed takes before its checks (`choosing`).
_CHOICE_LOCK = 0x424D5301


@contextmanager
def choosing() -> Iterator[None]:
    """A transaction for checking and saving a feed, one at a time: the bound on the feeds
    shown on BACnet is a count (Feed.clean), and two engineers choosing the 200th at once
    both counted 199 and both saved (8 at once made 202). Each change of a feed checks and
    saves inside this, after the one before has committed: PostgreSQL by an advisory lock
    held to the transaction's end, SQLite because its transactions begin IMMEDIATE
    (bms/settings.py), taking the one write lock before the count."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHOICE_LOCK])
        yield


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
                        "BACnet: take another off first."
                    }
                )

    def __str__(self) -> str:
        return f"{self.tag}:{self.name}" if self.tag else self.name
