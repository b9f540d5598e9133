"""Data for the inputs page (issue #26 item 10): every node's inputs with their last value, its
age, and a one-line summary of each process list, as emoncms's inputs page shows them.

An input is stale when its last reading is older than the node's silent bound (three of the
node's intervals: is_silent in sensors/ingest/node_state.py), the same rule that raises the
node's "silent" alarm, so the page and the alarm never disagree about one node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from feeds.models import Feed
from feeds.processes import catalog
from sensors.ingest import input_errors, node_state
from sensors.models import Node, Sensor


@dataclass
class StepLabel:
    """One step as the page writes it: the process, and what it names, in words."""

    process: str
    argument: str = ""


@dataclass
class InputRow:
    sensor: Sensor
    value: float | None
    at: datetime | None
    stale: bool
    steps: list[StepLabel] = field(default_factory=list)

    @property
    def value_text(self) -> str:
        return value_text(self.value)


@dataclass
class NodeGroup:
    node: Node
    inputs: list[InputRow]
    # Its input errors (sensors/ingest/input_errors.py): counts in words, when, the newest
    errors: str = ""
    errors_at: datetime | None = None
    errors_last: str = ""


def value_text(value: float | None) -> str:
    """A reading as people read it: 1234.5, 0.0012, 19.25 (six significant digits, as the
    feed explorer's CSV), not 1234.500."""
    return "" if value is None else f"{value:.6g}"


def step_labels(
    steps: object, feeds: dict[int, Feed], inputs: dict[int, Sensor]
) -> list[StepLabel]:
    """A saved process list in words: "log_to_feed → emontx:power1", "scale 2".

    A saved list is checked when saved, but older rows were not always (process_validation's
    docstring), so anything unexpected is written as it is, never raised."""
    if not isinstance(steps, list):
        return [StepLabel("not a list of steps")]
    labels = []
    for step in steps:
        if not isinstance(step, dict):
            labels.append(StepLabel("?", repr(step)))
            continue
        name = catalog.process_name(step.get("process")) or str(step.get("process"))
        labels.append(StepLabel(name, _argument_text(step, feeds, inputs)))
    return labels


def _argument_text(step: dict, feeds: dict[int, Feed], inputs: dict[int, Sensor]) -> str:
    if "feed" in step:
        feed = feeds.get(step["feed"])
        text = str(feed) if feed else f"feed {step['feed']} (missing)"
        return f"{step['minutes']} min → {text}" if "minutes" in step else text
    if "input" in step:
        sensor = inputs.get(step["input"])
        return f"{sensor.node.name}:{sensor.key}" if sensor else f"input {step['input']} (missing)"
    if "arg" in step:
        return f"{step['arg']:g}" if isinstance(step["arg"], int | float) else str(step["arg"])
    if "topic" in step:
        return str(step["topic"])
    return ""


def referenced(sensors: list[Sensor]) -> tuple[dict[int, Feed], dict[int, Sensor]]:
    """The feeds and inputs the process lists name, in two queries whatever their number."""
    feed_ids: set[int] = set()
    input_ids: set[int] = set()
    for sensor in sensors:
        steps = sensor.processes if isinstance(sensor.processes, list) else []
        feed_ids |= catalog.feed_ids(steps)
        input_ids |= catalog.input_ids(steps)
    feeds = Feed.objects.in_bulk(feed_ids)
    inputs = Sensor.objects.select_related("node").in_bulk(input_ids)
    return feeds, inputs


def input_groups(now: float | None = None) -> list[NodeGroup]:
    """Every node (site, then name) with its inputs (by key) and their last readings.

    Bounded by the inputs there are: auto-created ones by the per-site budget
    (sensors/ingest/input_budget.py), the rest made by engineers. Two Redis round trips."""
    now = time.time() if now is None else now
    sensors = list(Sensor.objects.select_related("node").order_by("node_id", "key"))
    feeds, inputs = referenced(sensors)
    by_node: dict[int, list[Sensor]] = {}
    for sensor in sensors:
        by_node.setdefault(sensor.node_id, []).append(sensor)
    nodes = list(Node.objects.select_related("site").order_by("site__name", "name"))
    last_of = node_state.last_values_of([node.pk for node in nodes])
    errors_of = input_errors.summaries([input_errors.node_subject(node.pk) for node in nodes])
    groups = []
    for node in nodes:
        last = last_of[node.pk]
        rows = []
        for sensor in by_node.get(node.pk, []):
            t, value = last.get(sensor.key, (None, None))
            rows.append(
                InputRow(
                    sensor=sensor,
                    value=value,
                    at=datetime.fromtimestamp(t, UTC) if t is not None else None,
                    stale=node_state.is_silent(t, node.interval, now),
                    steps=step_labels(sensor.processes, feeds, inputs),
                )
            )
        group = NodeGroup(node=node, inputs=rows)
        record = errors_of[input_errors.node_subject(node.pk)]
        if record:
            group.errors = input_errors.counted(record)
            group.errors_last = record.get("last", "")
            if record.get("at", "").isdigit():
                group.errors_at = datetime.fromtimestamp(int(record["at"]), UTC)
        groups.append(group)
    return groups
