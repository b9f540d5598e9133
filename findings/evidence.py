"""The series of a finding's evidence over its period, for the small chart on the findings
page (docs/FINDINGS.md, "Where to see them").

Each feed read at an interval that keeps it under MAX_POINTS points, averaged; each
actuator's commanded state (1 ON, 0 OFF) as steps from its audit rows (the one before the
range first, at most MAX_COMMANDS). An hour either side of the period, at most MAX_SPAN (a
finding that recurred for months shows its last MAX_SPAN), at most MAX_SERIES series.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils import timezone

from control.models import ActuatorCommand
from feeds.models import Feed
from feeds.store import service as feed_service
from findings.models import Finding

MAX_POINTS = 500
MAX_SPAN = timedelta(days=31)
MAX_SERIES = 10
MAX_COMMANDS = 2000
MARGIN = timedelta(hours=1)
# What `now` is (a test of recorded weeks sets it, tests/findings/conftest.py).
clock = timezone.now


def window(finding: Finding, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The period with an hour either side, never past now: a command's state is not
    drawn on into hours that have not happened."""
    end = min(finding.period_end + MARGIN, now or clock())
    return max(finding.period_start - MARGIN, end - MAX_SPAN), end


def interval_for(start: datetime, end: datetime) -> int:
    """Whole minutes between points, so the span is at most MAX_POINTS points."""
    seconds = (end - start).total_seconds() / MAX_POINTS
    return max(60, math.ceil(seconds / 60) * 60)


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def feed_series(feed: Feed, name: str, start: datetime, end: datetime) -> dict:
    rows = feed_service.read(
        feed.pk, int(start.timestamp()), int(end.timestamp()), interval_for(start, end),
        average=True, max_points=MAX_POINTS + 2,
    )  # fmt: skip
    return {"label": name or feed.name, "unit": feed.unit or "", "step": False, "points": rows}


def actuator_series(actuator_id: int, name: str, start: datetime, end: datetime) -> dict:
    rows = ActuatorCommand.objects.filter(actuator_id=actuator_id, error="")
    before = rows.filter(requested_at__lt=start).order_by("-requested_at").first()
    within = rows.filter(requested_at__gte=start, requested_at__lt=end).order_by("requested_at")
    points = [[_ms(start), int(before.state)]] if before else []
    points += [[_ms(c.requested_at), int(c.state)] for c in within[:MAX_COMMANDS]]
    if points:
        points.append([_ms(end), points[-1][1]])  # the last command holds to the end
    return {"label": f"{name or 'actuator'} (ON = 1)", "unit": "on/off", "step": True,
            "points": points}  # fmt: skip


def series(finding: Finding) -> dict:
    start, end = window(finding)
    items = finding.evidence if isinstance(finding.evidence, list) else []
    items = [i for i in items if isinstance(i, dict)][:MAX_SERIES]
    feeds = Feed.objects.in_bulk([i["feed"] for i in items if isinstance(i.get("feed"), int)])
    out = []
    for item in items:
        name = str(item.get("name", ""))[:100]
        if isinstance(item.get("feed"), int) and item["feed"] in feeds:
            out.append(feed_series(feeds[item["feed"]], name, start, end))
        elif isinstance(item.get("actuator"), int):
            out.append(actuator_series(item["actuator"], name, start, end))
    return {"start": _ms(start), "end": _ms(end), "series": out}
