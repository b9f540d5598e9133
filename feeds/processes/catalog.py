"""The input processes we run: emoncms's list (Modules/process/process_processlist.php), by the
same names and ids, and the shape of a step of each. No Django, no Redis.

A step is a JSON object: {"process": <name>, <argument>: <value>}. The argument key says its
type, as emoncms's ProcessArg does:

    "feed"     FEEDID   a feed id (our Feed primary key)
    "input"    INPUTID  an input id (our Sensor primary key)
    "arg"      VALUE    a finite number (goto_process: a 1-based position in the list)
    "topic"    TEXT     an MQTT topic (publish_to_mqtt)
    "minutes"  VALUE    power_to_kwh_custom's slot length, with "feed"

`process` may also be emoncms's id number (4 or "4"); `normalise_steps` turns it into the name,
so a list copied from an emoncms `processList` ("1:5,4:6") maps id by id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_STEPS = 64  # a process list longer than this is refused (emoncms lists are ~2-10 steps)
MAX_TOPIC_LEN = 200
MAX_SLOT_MINUTES = 1440


@dataclass(frozen=True)
class ProcessDef:
    id: int  # emoncms's id_num
    name: str
    args: tuple[str, ...]  # keys the step carries, see the module docstring
    stateful: bool = False  # keeps per-(input, step) state in Redis: replays are ignored
    reads_feed: bool = False  # needs the last value of its feed
    daily: bool = False  # writes one value per local day at emoncms's day slot
    optional: tuple[str, ...] = ()  # keys that may be present and are ignored


def _p(id_, name, args=(), **kw) -> ProcessDef:
    return ProcessDef(id_, name, tuple(args), **kw)


F, V, INP, T = ("feed",), ("arg",), ("input",), ("topic",)

_DEFS = [
    _p(1, "log_to_feed", F),
    _p(2, "scale", V),
    _p(3, "offset", V),
    _p(4, "power_to_kwh", F, stateful=True, reads_feed=True),
    _p(5, "power_to_kwhd", F, stateful=True, reads_feed=True, daily=True),
    _p(6, "times_input", INP),
    _p(7, "input_ontime", F, stateful=True, reads_feed=True, daily=True),
    _p(8, "whinc_to_kwhd", F, stateful=True, reads_feed=True, daily=True),
    _p(10, "update_feed_data", F, daily=True),
    _p(11, "add_input", INP),
    _p(12, "divide_input", INP),
    _p(14, "accumulator", F, stateful=True, reads_feed=True),
    _p(15, "ratechange", F, stateful=True),
    _p(20, "pulse_diff", F, stateful=True, reads_feed=True),
    _p(21, "kwh_to_power", F, stateful=True),
    _p(22, "subtract_input", INP),
    _p(23, "kwh_to_kwhd", F, stateful=True, reads_feed=True, daily=True),
    _p(24, "allowpositive"),
    _p(25, "allownegative"),
    _p(26, "signed2unsigned"),
    _p(27, "max_value", F, stateful=True, reads_feed=True, daily=True),
    _p(28, "min_value", F, stateful=True, reads_feed=True, daily=True),
    _p(29, "add_feed", F, reads_feed=True),
    _p(30, "sub_feed", F, reads_feed=True),
    _p(31, "multiply_by_feed", F, reads_feed=True),
    _p(32, "divide_by_feed", F, reads_feed=True),
    _p(33, "reset2zero"),
    _p(34, "wh_accumulator", F, stateful=True, reads_feed=True),
    _p(35, "publish_to_mqtt", T),
    _p(36, "reset2null"),
    _p(37, "reset2original"),
    _p(42, "if_zero_skip"),
    _p(43, "if_not_zero_skip"),
    _p(44, "if_null_skip"),
    _p(45, "if_not_null_skip"),
    _p(46, "if_gt_skip", V),
    _p(47, "if_gt_equal_skip", V),
    _p(48, "if_lt_skip", V),
    _p(49, "if_lt_equal_skip", V),
    _p(50, "if_equal_skip", V),
    _p(51, "if_not_equal_skip", V),
    _p(52, "goto_process", V),
    _p(53, "source_feed_data_time", F, reads_feed=True),
    _p(55, "add_source_feed", F, reads_feed=True),
    _p(56, "sub_source_feed", F, reads_feed=True),
    _p(57, "multiply_by_source_feed", F, reads_feed=True),
    _p(58, "divide_by_source_feed", F, reads_feed=True),
    _p(59, "reciprocal_by_source_feed", F, reads_feed=True),
    _p(60, "error_found"),  # emoncms gives it no id in its list (commented out); by name only
    _p(61, "max_value_allowed", V),
    _p(62, "min_value_allowed", V),
    _p(63, "abs_value", optional=V),  # emoncms declares a VALUE argument and ignores it
    _p(64, "kwh_accumulator", F, stateful=True, reads_feed=True),
    _p(65, "log_to_feed_join", F),
    _p(66, "max_input", INP),
    _p(67, "min_input", INP),
    _p(68, "max_feed", F, reads_feed=True),
    _p(69, "min_feed", F, reads_feed=True),
    # 70 is commented out of emoncms's current list (the function remains); kept for old lists.
    _p(70, "power_to_kwh_15m", F, stateful=True, reads_feed=True),
    _p(71, "power_to_kwh_custom", ("minutes", "feed"), stateful=True, reads_feed=True),
]

PROCESSES: dict[str, ProcessDef] = {d.name: d for d in _DEFS}
# error_found has no id in emoncms's list: an emoncms list cannot name it by number.
BY_ID: dict[int, str] = {d.id: d.name for d in _DEFS if d.name != "error_found"}
KNOWN = frozenset(PROCESSES)
STATEFUL = frozenset(d.name for d in _DEFS if d.stateful)
READS_FEED = frozenset(d.name for d in _DEFS if d.reads_feed)
DAILY = frozenset(d.name for d in _DEFS if d.daily)
# Steps the runner itself carries out: they change which step runs next, or need the value
# the list started with.
CONTROL_FLOW = frozenset(
    {"goto_process", "error_found", "reset2original"}
    | {d.name for d in _DEFS if d.name.startswith("if_")}
)


def _number(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and abs(value) < 1e300
    )


def _positive_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 2**63


def process_name(raw: object) -> str | None:
    """The process a step names: our name, an emoncms id (4, "4") or "process__name"."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return BY_ID.get(raw)
    if isinstance(raw, str):
        if raw.isascii() and raw.isdigit() and len(raw) < 4:
            return BY_ID.get(int(raw))
        name = raw.removeprefix("process__")  # emoncms's module-qualified key
        return name if name in PROCESSES else None
    return None


def normalise_steps(steps: object) -> tuple[list[dict], list[str]]:
    """(steps with process names, errors naming the position). Shape only: feed and input
    existence is checked by the caller that knows the database (sensors.process_validation)."""
    if not isinstance(steps, list):
        return [], ["processes must be a list of steps"]
    if len(steps) > MAX_STEPS:
        return [], [f"processes: at most {MAX_STEPS} steps, got {len(steps)}"]
    out: list[dict] = []
    errors: list[str] = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            errors.append(f"step {i}: must be an object like {{'process': 'log_to_feed'}}")
            continue
        name = process_name(step.get("process"))
        if name is None:
            errors.append(
                f"step {i}: unknown process {step.get('process')!r}; known: the names or emoncms "
                "ids in docs/FEEDS.md (e.g. log_to_feed, power_to_kwh)"
            )
            continue
        spec = PROCESSES[name]
        errors += _argument_errors(i, name, spec, step, len(steps))
        out.append({**step, "process": name})
    return out, errors


def _argument_errors(i: int, name: str, spec: ProcessDef, step: dict, length: int) -> list[str]:
    errors = []
    where = f"step {i} ({name})"
    extra = sorted(set(step) - {"process", *spec.args, *spec.optional})
    if extra:
        errors.append(f"{where}: unexpected field {extra[0]!r}")
    for key in spec.args:
        value = step.get(key)
        if key in ("feed", "input"):
            if not _positive_id(value):
                kind = "feed" if key == "feed" else "input (sensor)"
                errors.append(f"{where}: {key!r} must be a {kind} id (positive integer)")
        elif key == "topic":
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_TOPIC_LEN:
                errors.append(f"{where}: 'topic' must be an MQTT topic of 1-{MAX_TOPIC_LEN} chars")
            elif any(c in value for c in "#+\x00"):
                errors.append(f"{where}: 'topic' must not contain wildcards (# +) or NUL")
        elif key == "minutes":
            if (
                not _number(value)
                or value != int(value)
                or not 1 <= value <= MAX_SLOT_MINUTES
                or MAX_SLOT_MINUTES % int(value)
            ):
                errors.append(
                    f"{where}: 'minutes' must be a whole number of minutes dividing a day (1-1440)"
                )
        elif not _number(value):
            errors.append(f"{where}: 'arg' must be a finite number")
        elif name == "goto_process" and (value != int(value) or not 1 <= value <= length):
            errors.append(f"{where}: 'arg' must be a step position from 1 to {length} (emoncms)")
    for key in spec.optional:
        if key in step and not _number(step[key]):
            errors.append(f"{where}: {key!r} must be a finite number")
    return errors


def validate_steps(steps: object) -> list[str]:
    """Error messages naming the step index; empty when the list is well formed."""
    return normalise_steps(steps)[1]


def feed_ids(steps: list[dict]) -> set[int]:
    return {s["feed"] for s in steps if isinstance(s, dict) and _positive_id(s.get("feed"))}


def input_ids(steps: list[dict]) -> set[int]:
    return {s["input"] for s in steps if isinstance(s, dict) and _positive_id(s.get("input"))}
