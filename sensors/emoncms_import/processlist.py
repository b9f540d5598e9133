"""emoncms process lists ("1:5,2:0.5,process__power_to_kwh:6") mapped onto our process steps.

emoncms stores a list as comma-separated `<process>:<arg>[:<arg>]`, where `<process>` is an
`id_num` of Modules/process/process_processlist.php or a `module__function` key (newer
versions; `process__log_to_feed`). The table below is emoncms's `id_num -> function` with the
type of each argument. A feed argument becomes our `feed` (the id the feed got on import), a
value our `arg`, an input our `input` (the sensor it became), text our `arg`; whether the step
is usable here is decided by feeds.processes.run.validate_steps, so processes added there are
imported without touching this file.

A list is kept up to its first step that cannot be mapped (unknown process, a feed that was not
imported, a process we do not run): the steps before it run exactly as in emoncms, the ones
after would see a different value, so they are left out and each is reported by name.
"""

from __future__ import annotations

from dataclasses import dataclass

FEEDID, VALUE, INPUTID, TEXT, NONE = "feed", "value", "input", "text", "none"

# id_num -> (function, argument types), from emoncms's process_processlist.php.
PROCESSES: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("log_to_feed", (FEEDID,)), 2: ("scale", (VALUE,)), 3: ("offset", (VALUE,)),
    4: ("power_to_kwh", (FEEDID,)), 5: ("power_to_kwhd", (FEEDID,)),
    6: ("times_input", (INPUTID,)), 7: ("input_ontime", (FEEDID,)),
    8: ("whinc_to_kwhd", (FEEDID,)), 9: ("kwh_to_kwhd_old", (FEEDID,)),
    10: ("update_feed_data", (FEEDID,)), 11: ("add_input", (INPUTID,)),
    12: ("divide_input", (INPUTID,)), 13: ("phaseshift", (VALUE,)),
    14: ("accumulator", (FEEDID,)), 15: ("ratechange", (FEEDID,)),
    16: ("histogram", (FEEDID,)), 17: ("average", (FEEDID,)), 18: ("heat_flux", (FEEDID,)),
    19: ("power_acc_to_kwhd", (FEEDID,)), 20: ("pulse_diff", (FEEDID,)),
    21: ("kwh_to_power", (FEEDID,)), 22: ("subtract_input", (INPUTID,)),
    23: ("kwh_to_kwhd", (FEEDID,)), 24: ("allowpositive", ()), 25: ("allownegative", ()),
    26: ("signed2unsigned", ()), 27: ("max_value", (FEEDID,)), 28: ("min_value", (FEEDID,)),
    29: ("add_feed", (FEEDID,)), 30: ("sub_feed", (FEEDID,)),
    31: ("multiply_by_feed", (FEEDID,)), 32: ("divide_by_feed", (FEEDID,)),
    33: ("reset2zero", ()), 34: ("wh_accumulator", (FEEDID,)),
    35: ("publish_to_mqtt", (TEXT,)), 36: ("reset2null", ()), 37: ("reset2original", ()),
    42: ("if_zero_skip", ()), 43: ("if_not_zero_skip", ()), 44: ("if_null_skip", ()),
    45: ("if_not_null_skip", ()), 46: ("if_gt_skip", (VALUE,)),
    47: ("if_gt_equal_skip", (VALUE,)), 48: ("if_lt_skip", (VALUE,)),
    49: ("if_lt_equal_skip", (VALUE,)), 50: ("if_equal_skip", (VALUE,)),
    51: ("if_not_equal_skip", (VALUE,)), 52: ("goto_process", (VALUE,)),
    53: ("source_feed_data_time", (FEEDID,)), 55: ("add_source_feed", (FEEDID,)),
    56: ("sub_source_feed", (FEEDID,)), 57: ("multiply_by_source_feed", (FEEDID,)),
    58: ("divide_by_source_feed", (FEEDID,)), 59: ("reciprocal_by_source_feed", (FEEDID,)),
    60: ("error_found", ()), 61: ("max_value_allowed", (VALUE,)),
    62: ("min_value_allowed", (VALUE,)), 63: ("abs_value", ()),
    64: ("kwh_accumulator", (FEEDID,)), 65: ("log_to_feed_join", (FEEDID,)),
    66: ("max_input", (INPUTID,)), 67: ("min_input", (INPUTID,)), 68: ("max_feed", (FEEDID,)),
    69: ("min_feed", (FEEDID,)), 70: ("power_to_kwh_15m", (FEEDID,)),
    71: ("power_to_kwh_custom", (VALUE, FEEDID)),
}  # fmt: skip
BY_NAME = {name: (name, args) for name, args in PROCESSES.values()}
MAX_STEPS = 64  # emoncms lists are a handful of steps; a bound on what one input may carry


@dataclass(frozen=True)
class EmonStep:
    """One step as emoncms stores it: the process key as written, its arguments as text."""

    key: str
    args: tuple[str, ...]


def decode(text: str | None) -> list[EmonStep]:
    """The steps of a stored list (empty segments skipped, as emoncms skips them)."""
    steps = []
    for segment in (text or "").split(","):
        if not segment.strip():
            continue
        key, *args = segment.strip().split(":")
        steps.append(EmonStep(key.strip(), tuple(a.strip() for a in args)))
    return steps


def logged_feeds(text: str | None) -> list[int]:
    """The emoncms feed ids a stored list logs to (log_to_feed, log_to_feed_join): the
    history an input feeds, to name when its list is not applied."""
    found = []
    for step in decode(text)[:MAX_STEPS]:
        known = _known(step.key)
        if known and known[0] in ("log_to_feed", "log_to_feed_join") and step.args:
            arg = step.args[0]
            if arg.isascii() and arg.isdigit() and len(arg) < 10:
                found.append(int(arg))
    return found


def _known(key: str) -> tuple[str, tuple[str, ...]] | None:
    if key.isascii() and key.isdigit():
        return PROCESSES.get(int(key))
    module, sep, function = key.partition("__")
    if sep and module == "process":
        return BY_NAME.get(function)
    return None


@dataclass
class Mapped:
    steps: list[dict]
    problems: list[str]  # one per step left out, naming it


def to_steps(text: str | None, feeds: dict[int, int], inputs: dict[int, int], validate) -> Mapped:
    """Our steps for an emoncms list. `feeds`/`inputs`: emoncms id -> our id; `validate`:
    feeds.processes.run.validate_steps (passed in so this module stays free of the runner)."""
    emon = decode(text)
    out: list[dict] = []
    for index, step in enumerate(emon):
        why = _map_one(step, feeds, inputs, validate, out) if index < MAX_STEPS else (
            f"more than {MAX_STEPS} steps"
        )  # fmt: skip
        if why:
            shown = [f"{s.key}:{':'.join(s.args)}" for s in emon[index:]]
            return Mapped(out, [f"step {index + 1} {shown[0]} ({why})"] + [
                f"step {index + 1 + k} {s} (left out: it follows an unmapped step)"
                for k, s in enumerate(shown[1:], start=1)
            ])  # fmt: skip
    return Mapped(out, [])


def _map_one(step: EmonStep, feeds, inputs, validate, out: list[dict]) -> str:
    """Append our step to `out`, or return why it cannot be."""
    known = _known(step.key)
    if known is None:
        return f"process {step.key!r} is not one of emoncms's core processes"
    name, types = known
    if len(step.args) < len(types):
        return f"{name} needs {len(types)} argument(s)"
    ours: dict = {"process": name}
    for kind, raw in zip(types, step.args, strict=False):
        if kind == FEEDID:
            target = feeds.get(int(raw)) if raw.isascii() and raw.isdigit() else None
            if target is None:
                return f"{name}: feed {raw} was not imported"
            ours["feed"] = target
        elif kind == INPUTID:
            target = inputs.get(int(raw)) if raw.isascii() and raw.isdigit() else None
            if target is None:
                return f"{name}: input {raw} was not imported"
            ours["input"] = target
        elif kind == VALUE:
            try:
                ours["arg"] = float(raw)
            except ValueError:
                return f"{name}: argument {raw[:20]!r} is not a number"
        elif kind == TEXT:
            ours["arg"] = raw
    errors = validate([ours])
    if errors:
        return f"not supported here: {errors[0].removeprefix('step 0: ')}"
    out.append(ours)
    return ""
