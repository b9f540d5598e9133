"""manage.py replay_strategy ZONE --from DATE --to DATE [--step S] [--json]
manage.py replay_strategy --heat-main NAME --from DATE --to DATE [--step S] [--json]"""

from __future__ import annotations

import json
from dataclasses import asdict
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from control.heat_main_replay import find_heat_main, replay_heat_main
from control.models import Zone
from control.replay import parse_day, replay
from feeds.store.phpfina import FeedError


class Command(BaseCommand):
    help = (
        "Run a zone's control strategies over its recorded temperature feed and bookings, "
        "without touching any relay. Reports switching times, heating hours, comfort misses "
        "(occupancy started below setpoint) and short cycles. With --heat-main: the main's "
        "sequencing and thermal store over its zones' and sensors' recorded feeds (stages, "
        "lead rotation, store charge and discharge, with reasons)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("zone", nargs="?", help="Zone slug or name.")
        parser.add_argument(
            "--heat-main", dest="heat_main", help="Replay this heat main (name or id) instead."
        )
        parser.add_argument(
            "--from", dest="start", required=True, help="YYYY-MM-DD (local) or ISO date-time."
        )
        parser.add_argument(
            "--to",
            dest="end",
            required=True,
            help="YYYY-MM-DD (inclusive, local) or ISO date-time.",
        )
        parser.add_argument(
            "--step",
            type=int,
            default=None,
            help="Seconds per step (default: from the feed, ≥ 60).",
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, **opts) -> None:
        if bool(opts["zone"]) == bool(opts["heat_main"]):
            raise CommandError("Name a zone or a --heat-main (one of them).")
        tz = ZoneInfo(settings.TIME_ZONE)
        try:
            start = parse_day(opts["start"], tz)
            end = parse_day(opts["end"], tz, end_of_day=True)
            if opts["step"] is not None and opts["step"] < 10:
                raise ValueError("--step must be at least 10 seconds.")
            if opts["heat_main"]:
                main = find_heat_main(opts["heat_main"])
                if main is None:
                    raise CommandError(f"No heat main named '{opts['heat_main']}'.")
                report = replay_heat_main(main, start, end, opts["step"])
            else:
                zone = (
                    Zone.objects.filter(slug=opts["zone"]).first()
                    or Zone.objects.filter(name=opts["zone"]).first()
                )
                if zone is None:
                    raise CommandError(f"No zone with slug or name '{opts['zone']}'.")
                report = replay(zone, start, end, opts["step"])
        except (ValueError, FeedError) as exc:
            raise CommandError(str(exc)) from exc
        if opts["json"]:
            self.stdout.write(json.dumps(asdict(report), default=str, indent=2))
        else:
            self.stdout.write(report.as_text(tz))
