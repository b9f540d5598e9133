"""manage.py check_processes: every stored process list checked as a save would check it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from sensors.models import Sensor
from sensors.process_validation import check_process_list


class Command(BaseCommand):
    help = (
        "Check every sensor's process list as saving it would (feeds and inputs exist and "
        "belong to its site, arguments typed, goto in range). Lists a bad step per line and "
        "exits non-zero when any is found: a step naming a missing feed loses its points."
    )

    def handle(self, *args, **opts) -> None:
        bad = 0
        sensors = Sensor.objects.select_related("node").order_by("pk")
        for sensor in sensors.iterator(chunk_size=500):
            _steps, errors = check_process_list(
                sensor.processes, site_id=sensor.node.site_id, exclude_sensor=sensor.pk
            )
            for error in errors:
                self.stdout.write(f"sensor {sensor.pk} ({sensor}): {error}")
            bad += bool(errors)
        if bad:
            raise CommandError(f"{bad} sensor(s) with a bad process list")
        self.stdout.write(f"{sensors.count()} process list(s) OK")
