"""Alarms whose cause was removed: each alarm kind that is about one object (a sensor's range,
a node, a zone) registers how to tell which of those objects still give it a cause, and the
watchdog clears the open alarms of the others.

An alarm cleared only when its condition is seen to end never cleared when the rule that
raised it went away: a sensor-range alarm stayed open for ever once the range was removed (no
later value was checked against a range), a node-silent alarm once the node was deleted or
disabled (#28). The apps above register their kinds in their AppConfig.ready() (alarms cannot
import them: it sits below them), e.g. `register("sensor-range", sensors_with_a_range)`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from alarms.lifecycle import clear_alarm
from alarms.models import Alarm

log = logging.getLogger(__name__)

# At most this many open alarms are looked at per prefix and sweep: a flood must not make the
# watchdog slow (the rest wait for the next sweep, a minute later).
MAX_PER_SWEEP = 5_000


@dataclass(frozen=True)
class Subject:
    # Of the given ids, those that still give the alarm a cause (the object exists and its rule
    # is still set). Ids are the part of the key after "<prefix>:", up to the next ":".
    still_caused: Callable[[Collection[int]], Collection[int]]
    # Called with the ids whose alarms were cleared (the app's own bookkeeping, e.g. Redis sets).
    on_cleared: Callable[[list[int]], None] | None = None


_SUBJECTS: dict[str, Subject] = {}


def register(
    prefix: str,
    still_caused: Callable[[Collection[int]], Collection[int]],
    on_cleared: Callable[[list[int]], None] | None = None,
) -> None:
    _SUBJECTS[prefix] = Subject(still_caused, on_cleared)


def subject_id(key: str, prefix: str) -> int | None:
    """The object id in `<prefix>:<id>[:...]`, or None when the key has none (e.g. `:none`)."""
    head = key.removeprefix(prefix + ":").split(":", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


def sweep_removed() -> dict[str, list[int]]:
    """Clear the open alarms of every registered kind whose object or rule is gone. Returns
    {prefix: cleared ids}."""
    cleared: dict[str, list[int]] = {}
    for prefix, subject in _SUBJECTS.items():
        keys = list(
            Alarm.objects.open()
            .filter(key__startswith=prefix + ":")
            .values_list("key", flat=True)[:MAX_PER_SWEEP]
        )
        ids = {k: subject_id(k, prefix) for k in keys}
        wanted = {i for i in ids.values() if i is not None}
        if not wanted:
            continue
        alive = set(subject.still_caused(wanted))
        gone = [k for k, i in ids.items() if i is not None and i not in alive]
        for key in gone:
            clear_alarm(key)
        if gone:
            done = sorted({ids[k] for k in gone})  # type: ignore[type-var]
            cleared[prefix] = done
            log.info("cleared %d %s alarm(s): their object or rule was removed", len(done), prefix)
            if subject.on_cleared is not None:
                subject.on_cleared(done)
    return cleared
