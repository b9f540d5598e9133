"""The emoncms input API as emoncms answers it: `/input/post` and `/input/bulk`, their values,
bodies and names.

emonhub keeps a batch until the reply is exactly `ok` and resends anything else forever, so one
bad value must never refuse a batch here. Compared with sensors/ingest/parse.py (strict, used by our
own REST API, a request with any bad row refused whole):

- values as emoncms's input_methods.php takes them: `null` (and the text `null` of the `json`
  and `csv` forms) is 0, as PHP's `(float) null`; numeric text (`"23.5"`, what many ESP
  firmwares send) is that number; `true` / `false` are 1 / 0;

- the body may be raw zlib JSON (`cb=1`, emonhub with `sendnames = 1` or `compress = 1`), hex
  of zlib JSON in `data` (`c=1`), or `data=` form/query text, as emoncms's bulk() reads them;
- node and input names are kept as emoncms keeps them: characters outside
  `[\\p{N}\\p{L}_\\s\\-.]` are removed (emoncms's process_node does the same), so
  `external temperature`, `température` and `emon.pi` are names;
- a value that is `""` or text that is not a number, nested, non-finite or too large for a
  feed is SKIPPED and reported (emoncms stores a made-up 0 for such text in `fulljson` and
  bulk, and refuses the whole post for it in `json` / `csv`); a row whose time or node is
  unusable is skipped the same way. The caller records the skips where staff see them
  (sensors/ingest/input_errors.py) and still answers `ok`.

What is still refused whole (4xx): a body that is not zlib/hex/JSON, not a list of rows, or over
the bounds (rows, values, decompressed size). emoncms answers such a request with an error text
that emonhub retries too, so no batch emonhub can produce is refused.
"""

from __future__ import annotations

import binascii
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sensors.ingest.parse import (
    MAX_ABS_VALUE,
    MAX_NAME_LENGTH,
    MIN_TIME,
    IngestError,
    Limits,
    NodeRef,
    Row,
    check_key,
    check_node_ref,
    check_time,
    check_totals,
    decompress_body,
    emoncms_name,
    finite_float,
    parse_time_value,
)

SHOWN_CHARS = 40  # of a skipped value, in the record


@dataclass(frozen=True)
class NonFinite:
    """`NaN` / `Infinity` in the JSON (Python's json.dumps writes them; emonhub is Python): a
    value to skip, not a reason to refuse the batch."""

    literal: str


@dataclass(frozen=True)
class LongInteger:
    """An integer in the JSON with more digits than Python's int() reads (4,300: it raises
    a ValueError naming `sys.set_int_max_str_digits()`): far beyond any value a feed holds
    (float32), so a value to skip, not a reason to refuse the batch (#26 outside tester)."""

    digits: int


# An integer this long is read as a LongInteger (only when the fast parse failed on one, below).
MAX_INT_DIGITS = 400


def _json_int(text: str) -> int | LongInteger:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else LongInteger(digits)


def loads_lenient(text: str) -> Any:
    """The JSON of a post: `NaN`/`Infinity` as NonFinite, an over-long integer as
    LongInteger, for the caller to skip. Malformed JSON raises ValueError (RecursionError when
    nested too deeply), as json.loads does."""
    try:
        return json.loads(text, parse_constant=NonFinite)
    except json.JSONDecodeError:
        raise
    except ValueError:
        # int() refused a too-long integer (the only ValueError json.loads raises that is not
        # a JSONDecodeError); read again with the reader of integers that takes any length.
        # Not on the first read: a Python call per integer costs a 50,000-value bulk.
        return json.loads(text, parse_constant=NonFinite, parse_int=_json_int)


@dataclass(frozen=True)
class Skipped:
    """One value (or row) left out of an accepted batch, and why."""

    row: int | None  # None: not a row of a request (the worker's late readings)
    where: str
    reason: str

    def text(self) -> str:
        if self.row is None:
            return f"{self.where}: {self.reason}"
        return f"row {self.row} {self.where}: {self.reason}"


@dataclass
class BulkBatch:
    rows: list[Row] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # (row index, node) for every row that names a node, kept or not: a node key is refused for
    # a row naming another node even when none of that row's values could be used.
    named: list[tuple[int, NodeRef]] = field(default_factory=list)
    # Skipped values beyond those listed: a flood's rows are listed as one (name_screen.py).
    unlisted: int = 0

    def skip_count(self) -> int:
        return len(self.skipped) + self.unlisted


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def lenient_value(value: Any, *, php_casts: bool = True) -> tuple[float | None, str]:
    """(number, "") for a usable value, else (None, why it was skipped).

    With `php_casts` (/input/post and /input/bulk), as emoncms's input_methods.php: null is 0
    (`(float) null`; the `json`/`csv` forms name it `null`), a boolean is 1 or 0. Numeric text
    is its number either way. Without (MQTT), null and booleans are skipped too."""
    if value is None:
        return (0.0, "") if php_casts else (None, "null")
    if isinstance(value, NonFinite):
        return None, f"{value.literal} is not a finite number"
    if isinstance(value, LongInteger):
        return None, f"a number of {value.digits} digits is too large for a feed (float32)"
    if isinstance(value, bool):
        return (float(value), "") if php_casts else (None, f"boolean {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None, "empty text"
        if text == "null" and php_casts:
            return 0.0, ""
        number = finite_float(text)
        if number is None:
            return None, f"text {_shown(value)} is not a number"
    elif isinstance(value, int | float):
        number = finite_float(value)
        if number is None:
            return None, f"{_shown(value)} is not a finite number"
    else:
        return None, f"{type(value).__name__} is not a number"
    if abs(number) > MAX_ABS_VALUE:
        return None, f"{_shown(value)} is too large for a feed (float32)"
    return number, ""


def node_ref(raw: Any) -> tuple[str | int | None, str]:
    """(node name or radio id, "") or (None, why) for a row's second item."""
    if raw is None or raw == "":
        return None, ""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return None, f"node {_shown(raw)} is not a name or a number"
    if isinstance(raw, float):
        if not raw.is_integer():
            return None, f"node {_shown(raw)} is not a whole number"
        raw = int(raw)
    if isinstance(raw, int):
        return (raw, "") if raw >= 0 else (None, f"node {raw} is negative")
    name = emoncms_name(raw).strip()
    if not name:
        return None, f"node {_shown(raw)} has no letter or digit"
    if len(name) > MAX_NAME_LENGTH:
        return None, f"node name longer than {MAX_NAME_LENGTH} characters"
    return (int(name) if name.isascii() and name.isdigit() else name), ""


# --- /input/post ---------------------------------------------------------------------------------

# What emoncms's post() keeps of `json` / `csv` text: letters, numbers, `_`, spaces, `-`, `.`,
# `:` and `,` (its `[^\p{N}\p{L}_\s\-.:,]` removed).
_LOOSE_STRIP = re.compile(r"[^\w\s\-.:,]", re.UNICODE)


def parse_loose_pairs(
    text: str, field_name: str, batch: BulkBatch | None = None
) -> dict[str, float]:
    """emoncms `json` / `csv` text: `{power1:100,power2:200}` or `100,200,300` (keys 1, 2, 3).
    A value that is not a number is skipped (into `batch.skipped`) and keeps its position."""
    cleaned = _LOOSE_STRIP.sub("", text).strip()
    if not cleaned:
        raise IngestError(f"{field_name}: no values", field=field_name)
    values: dict[str, float] = {}
    index = 0
    for part in cleaned.split(","):
        part = part.strip()
        if ":" in part:
            key, _, raw = part.partition(":")
            key = check_key(key.strip(), f"{field_name}.{key.strip()}"[:80] or field_name)
            where = f"{field_name}.{key}"[:80]
        else:
            index += 1
            key, raw, where = str(index), part, f"{field_name}[{index}]"
        number, why = lenient_value(raw)
        if number is None:
            if batch is not None:
                batch.skipped.append(Skipped(None, where, why))
        else:
            values[key] = number
    return values


def parse_post(params: dict[str, str], now: float, limits: Limits) -> tuple[BulkBatch, bool]:
    """emoncms input/post: `node`, one of `fulljson` | `json` | `csv` | `data`, `time`.
    Returns (the batch: at most one row, and the values skipped; fulljson?) — the reply
    differs for fulljson. A post whose every value is skipped queues nothing."""
    node = check_node_ref(params.get("node"), "node")
    t: float | None = None
    batch = BulkBatch()
    fulljson = "fulljson" in params
    if fulljson:
        try:
            doc = loads_lenient(params["fulljson"])
        except RecursionError as exc:
            raise IngestError("fulljson: JSON nested too deeply", field="fulljson") from exc
        except ValueError as exc:
            raise IngestError(f"fulljson: malformed JSON ({exc})", field="fulljson") from exc
        if not isinstance(doc, dict) or not doc:
            raise IngestError("fulljson: must be a non-empty JSON object", field="fulljson")
        if "time" in doc:
            t = parse_time_value(doc.pop("time"), "fulljson.time")
        if not doc:
            raise IngestError("fulljson: no values besides time", field="fulljson")
        values: dict[str, float] = {}
        for raw_key, raw in doc.items():
            # As emoncms (input_methods.php): characters a name may not hold are removed
            # ("Power (W)" is input "Power W"); a name with nothing usable left is skipped.
            key = emoncms_name(raw_key)
            where = f"fulljson.{(key if key.strip() else raw_key)[:SHOWN_CHARS]}"
            if not key.strip() or len(key) > MAX_NAME_LENGTH:
                batch.skipped.append(Skipped(None, where, "input name not usable"))
                continue
            number, why = lenient_value(raw)
            if number is None:
                batch.skipped.append(Skipped(None, where, why))
            else:
                values[key] = number
    else:
        for name in ("json", "csv", "data"):
            if params.get(name, "").strip():
                values = parse_loose_pairs(params[name], name, batch)
                break
        else:
            raise IngestError("no data: send fulljson, json or csv", field="fulljson|json|csv|data")
    if params.get("time", "").strip():
        t = parse_time_value(params["time"], "time")
    t_int = check_time(t, now, limits, "time") if t is not None else int(now)
    if values:
        batch.rows.append(Row(node, t_int, values))
        check_totals(batch.rows, limits)
    return batch, fulljson


# --- /input/bulk ---------------------------------------------------------------------------------


def bulk_text(params: dict[str, str], body: bytes | None, limits: Limits) -> str:
    """The bulk JSON text of a request, as emoncms's bulk() finds it.

    `cb` (any value, as emoncms tests only that it exists): the raw request body is zlib data.
    `c`: `data` is hex of zlib data. Otherwise `data` is the JSON text."""
    if "cb" in params:
        if body is None:
            raise IngestError("cb: the compressed data must be the POST body", field="cb")
        raw = decompress_body(body, limits)
    elif "c" in params:
        hex_text = params.get("data", "").strip()
        if len(hex_text) > 2 * limits.max_decompressed_bytes:
            raise IngestError("data: compressed hex too long", status=413, field="data")
        try:
            compressed = binascii.unhexlify(hex_text)
        except (binascii.Error, ValueError):
            raise IngestError("data: not hexadecimal with c=1", field="c") from None
        raw = decompress_body(compressed, limits, field="c")
    else:
        text = params.get("data")
        if text is None or not text.strip():
            raise IngestError("data: missing (data=[[t, node, v1, ...], ...])", field="data")
        return text
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IngestError("body: decompressed data is not UTF-8 JSON", field="data") from None


def _reference(params: dict[str, str], name: str) -> float:
    value = finite_float(params[name].strip())
    if value is None:
        raise IngestError(f"{name}: must be unix seconds, got {params[name][:40]!r}", field=name)
    return value


def _time_ref(params: dict[str, str], doc: list, now: float) -> float:
    """emoncms: sentat and offset mean "the hub's clock read this when it sent", so
    t + (server now - sentat) corrects the hub's clock; time= is an absolute base; with none,
    the last row is taken to have arrived now."""
    if params.get("sentat", "").strip():
        return now - _reference(params, "sentat")
    if params.get("offset", "").strip():
        return now - _reference(params, "offset")
    if params.get("time", "").strip():
        return _reference(params, "time")
    last = doc[-1]
    first = last[0] if isinstance(last, list) and last else None
    t_last = first if isinstance(first, int | float) and not isinstance(first, bool) else None
    return now - (finite_float(t_last) or 0.0) if t_last is not None else now


def _row_values(item: list, index: int, batch: BulkBatch) -> dict[str, float]:
    values: dict[str, float] = {}
    position = 1
    for offset, value in enumerate(item[2:], start=2):
        where = f"data[{offset}]"
        if isinstance(value, dict):
            for raw_key, v in value.items():
                key = emoncms_name(str(raw_key))
                shown = f"{where}.{str(raw_key)[:SHOWN_CHARS]}"
                if not key.strip() or len(key) > MAX_NAME_LENGTH:
                    batch.skipped.append(Skipped(index, shown, "input name not usable"))
                    continue
                number, why = lenient_value(v)
                if number is None:
                    batch.skipped.append(Skipped(index, shown, why))
                else:
                    values[key] = number
            continue
        # A positional value takes the next key (1, 2, ...) even when skipped, so the values
        # after it keep their emoncms input numbers.
        number, why = lenient_value(value)
        if number is None:
            batch.skipped.append(Skipped(index, f"{where} (input {position})", why))
        else:
            values[str(position)] = number
        position += 1
    return values


def parse_bulk(
    text: str,
    params: dict[str, str],
    now: float,
    limits: Limits,
    select: Callable[[list], list[int] | None] | None = None,
) -> BulkBatch:
    """Rows of `data=[[t, node, v1 | {"name": v}, ...], ...]`; bad values and rows skipped.
    `select(rows)`: the indexes of the rows to read (None: all), decided on the decoded JSON
    before any row is read (a gateway flood's rows: sensors/ingest/name_screen.py)."""
    doc = decode_bulk(text, limits)
    return parse_bulk_doc(doc, params, now, limits, None if select is None else select(doc))


def decode_bulk(text: str, limits: Limits) -> list:
    """The bulk JSON as a non-empty list of at most limits.max_rows rows (not yet checked)."""
    try:
        doc = loads_lenient(text)
    except RecursionError as exc:  # the parser's own words name its stack, not the body
        raise IngestError("data: JSON nested too deeply", field="data") from exc
    except ValueError as exc:
        raise IngestError(f"data: malformed JSON ({exc})", field="data") from exc
    if not isinstance(doc, list) or not doc:
        raise IngestError("data: must be a non-empty JSON list of rows", field="data")
    if len(doc) > limits.max_rows:
        raise IngestError(
            f"too many rows: {len(doc)} (limit {limits.max_rows}); split the batch",
            status=413,
            field="data",
        )
    return doc


def parse_bulk_doc(
    doc: list,
    params: dict[str, str],
    now: float,
    limits: Limits,
    only: list[int] | None = None,
) -> BulkBatch:
    """parse_bulk on decoded rows. `only`: the indexes of the rows to read, the others passed
    over unread (the caller records why): a flood's rows for names it refuses cost nothing."""
    time_ref = _time_ref(params, doc, now)
    batch = BulkBatch()
    total = 0
    for index in range(len(doc)) if only is None else only:
        item = doc[index]
        if not isinstance(item, list):
            batch.skipped.append(Skipped(index, "data", "a row must be a list [t, node, ...]"))
            continue
        if len(item) >= 2:
            named, why = node_ref(item[1])
            if not why:
                batch.named.append((index, named))
        if len(item) <= 2:
            continue  # emoncms skips rows without values
        t_raw = item[0]
        t_number = (
            finite_float(t_raw)
            if isinstance(t_raw, int | float) and not isinstance(t_raw, bool)
            else None
        )
        if t_number is None:
            batch.skipped.append(Skipped(index, "data[0]", f"time {_shown(t_raw)} not a number"))
            continue
        t = int(math.floor(time_ref + t_number))
        if t < MIN_TIME or t > now + limits.max_future_s:
            batch.skipped.append(
                Skipped(index, "data[0]", f"time {t} before 2000 or more than "
                        f"{limits.max_future_s} s ahead; check the hub clock")
            )  # fmt: skip
            continue
        node, why = node_ref(item[1])
        if why:
            batch.skipped.append(Skipped(index, "data[1]", why))
            continue
        values = _row_values(item, index, batch)
        if not values:
            continue
        total += len(values)
        if total > limits.max_values:
            raise IngestError(
                f"too many values: more than {limits.max_values}; split the batch",
                status=413,
                field="data",
            )
        batch.rows.append(Row(node, t, values))
    return batch
