"""Parse and validate the three ingest formats into rows `(node_ref, t, {key: value})`.

Pure: no database, no Redis. The views authenticate the key, check every row's node
against the key's node, and hand the rows to one Celery task. Every problem raises
IngestError naming the field (and the row index, for batches) so the client can fix it;
a request with any bad row is refused whole, so nothing of it is half-stored.

Formats:
- REST `POST /api/v1/readings`: `{"node": n, "time": t, "values": {"k": v}}` or a list of them.
- emoncms `/input/post` is read by sensors/ingest/emoncms_input.py with these checks (its bad
  values are skipped and recorded, as emonhub's endpoints must never refuse a batch for one).
- emoncms `/input/bulk`: `data=[[t, node, v1, v2 | {"name": v}, ...], ...]` with the time
  reference from `sentat`, `offset` or `time` (emoncms input_methods.php semantics).
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# 2000-01-01T00:00:00Z: nothing we ingest is older (a node with an unset clock posts 1970).
MIN_TIME = 946_684_800
MAX_NAME_LENGTH = 64  # Sensor.key and Node.name columns
# Largest magnitude a PHPFina float32 slot can hold.
MAX_ABS_VALUE = 3.4e38

NodeRef = str | int | None


@dataclass(frozen=True)
class Limits:
    max_rows: int = 2500
    max_values: int = 50_000
    max_future_s: int = 900
    max_decompressed_bytes: int = 4 * 1_048_576


class IngestError(Exception):
    """A 4xx answer: message, status, and where the problem is."""

    def __init__(
        self, message: str, status: int = 400, *, field: str | None = None, row: int | None = None
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field
        self.row = row

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"success": False, "error": self.message}
        if self.field is not None:
            body["field"] = self.field
        if self.row is not None:
            body["row"] = self.row
        return body


@dataclass
class Row:
    node: NodeRef
    t: int
    values: dict[str, float] = field(default_factory=dict)


def emoncms_name(raw: str) -> str:
    """A name as emoncms stores it: only letters, numbers (any script), `_`, whitespace, `-`, `.`
    (emoncms's `[\\p{N}\\p{L}_\\s\\-.]`; str.isalnum is Unicode letters and numbers)."""
    return "".join(c for c in raw if c.isalnum() or c in "_-." or c.isspace())


def is_emoncms_name(name: str) -> bool:
    """1-64 of emoncms's name characters, not only whitespace: `external temperature`,
    `température` and `emon.pi` are names."""
    return 0 < len(name) <= MAX_NAME_LENGTH and bool(name.strip()) and emoncms_name(name) == name


# --- Shared checks -------------------------------------------------------------------------------


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def loads_strict(text: str | bytes, field_name: str) -> Any:
    """json.loads that refuses NaN/Infinity (Python accepts them; JSON does not)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:  # the parser's own words name its stack, not the body
        raise IngestError(f"{field_name}: JSON nested too deeply", field=field_name) from exc
    except ValueError as exc:
        raise IngestError(f"{field_name}: malformed JSON ({exc})", field=field_name) from exc


def check_key(key: Any, where: str, row: int | None = None) -> str:
    if not isinstance(key, str | int) or isinstance(key, bool):
        raise IngestError(f"{where}: input key must be a string", field=where, row=row)
    key = str(key)
    if not is_emoncms_name(key):
        raise IngestError(
            f"{where}: input key {key[:70]!r} must be 1-64 letters, digits, spaces, '_', '-' "
            "or '.'",
            field=where,
            row=row,
        )
    return key


# Numeric text as a device writes it: ASCII digits, an optional sign, point and exponent.
# Python's float() also takes '1_000', Arabic-Indic and full-width digits ('١٢٣', '１２'), which
# no device sends and emoncms's (float) cast does not read as those numbers: an outside check
# found them stored as 1000, 123 and 12. Such text is "not a number" here.
NUMERIC_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def numeric_text(text: str) -> float:
    """float() of numeric text (surrounding white space allowed); ValueError for anything else,
    infinite and NaN values included only as far as float() reads them."""
    stripped = text.strip()
    if not NUMERIC_TEXT.fullmatch(stripped):
        raise ValueError(f"not numeric text: {text[:40]!r}")
    return float(stripped)


def finite_float(value: int | float | str) -> float | None:
    """float(value) when it is a finite number, else None.

    JSON allows integers of any length: float() of a 400-digit one raises OverflowError,
    which must become a 400 naming the field, not a 500.
    """
    try:
        number = numeric_text(value) if isinstance(value, str) else float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def check_value(value: Any, where: str, row: int | None = None, *, allow_text: bool) -> float:
    """A finite float from a JSON number (or numeric text, where emoncms casts text)."""
    if isinstance(value, bool) or value is None:
        raise IngestError(f"{where}: value must be a number, got {value!r}", field=where, row=row)
    if isinstance(value, str):
        if not allow_text:
            raise IngestError(f"{where}: value must be a number, got text", field=where, row=row)
        try:
            value = numeric_text(value)
        except ValueError:
            raise IngestError(
                f"{where}: value {value[:40]!r} is not numeric", field=where, row=row
            ) from None
    if not isinstance(value, int | float):
        raise IngestError(
            f"{where}: value must be a number, got {type(value).__name__}", field=where, row=row
        )
    number = finite_float(value)
    if number is None or abs(number) > MAX_ABS_VALUE:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise IngestError(f"{where}: value {shown} is not a finite number", field=where, row=row)
    return number


def check_time(t: float, now: float, limits: Limits, where: str, row: int | None = None) -> int:
    t_int = int(math.floor(t))
    if t_int < MIN_TIME:
        raise IngestError(
            f"{where}: time {t_int} is before 2000-01-01 (unix seconds expected)",
            field=where,
            row=row,
        )
    if t_int > now + limits.max_future_s:
        raise IngestError(
            f"{where}: time {t_int} is {t_int - int(now)} s in the future "
            f"(limit {limits.max_future_s} s); check the device clock",
            field=where,
            row=row,
        )
    return t_int


def parse_time_value(raw: Any, where: str, row: int | None = None) -> float:
    """Unix seconds from a number, numeric text or an ISO 8601 string with a zone."""
    if isinstance(raw, bool) or raw is None:
        raise IngestError(f"{where}: time must be unix seconds or ISO 8601", field=where, row=row)
    if isinstance(raw, int | float):
        number = finite_float(raw)
        if number is None:
            raise IngestError(f"{where}: time is not finite", field=where, row=row)
        return number
    if isinstance(raw, str):
        text = raw.strip()
        try:
            number = numeric_text(text)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise IngestError(
                f"{where}: time {text[:40]!r} is neither unix seconds nor ISO 8601",
                field=where,
                row=row,
            ) from None
        if parsed.tzinfo is None:
            raise IngestError(
                f"{where}: ISO time {text[:40]!r} needs a zone, e.g. 'Z'", field=where, row=row
            )
        return parsed.timestamp()
    raise IngestError(f"{where}: time must be unix seconds or ISO 8601", field=where, row=row)


def check_node_ref(raw: Any, where: str, row: int | None = None) -> NodeRef:
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise IngestError(f"{where}: node must be a name or a number", field=where, row=row)
    if isinstance(raw, int):
        return raw
    if not is_emoncms_name(raw) or raw != raw.strip():
        raise IngestError(
            f"{where}: node {raw[:70]!r} is not a valid node name", field=where, row=row
        )
    # isdigit() is true for "¹" and other Unicode digits int() refuses (a 500 found by the
    # fuzz test): only ASCII digits are a node number.
    return int(raw) if raw.isascii() and raw.isdigit() else raw


def check_totals(rows: list[Row], limits: Limits) -> None:
    if len(rows) > limits.max_rows:
        raise IngestError(
            f"too many rows: {len(rows)} (limit {limits.max_rows}); split the batch",
            status=413,
            field="data",
        )
    total = sum(len(r.values) for r in rows)
    if total > limits.max_values:
        raise IngestError(
            f"too many values: {total} (limit {limits.max_values}); split the batch",
            status=413,
            field="data",
        )


# --- REST /api/v1/readings ------------------------------------------------------------------------


def parse_readings(
    body: bytes,
    now: float,
    limits: Limits,
    authorize: Callable[[NodeRef, int | None], None] | None = None,
) -> list[Row]:
    """One reading object or a list of them.

    `authorize(node, row)` is called for each row's node before its time and values are
    looked at: a key posting bad values for another node is told 403 (not its node), not 400
    about the values (#25: the permission is checked before the value)."""
    if not body.strip():
        raise IngestError("empty body: send a JSON reading or a list of readings", field="body")
    doc = loads_strict(body, "body")
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise IngestError("empty list of readings", field="body")
    if len(items) > limits.max_rows:
        raise IngestError(
            f"too many readings: {len(items)} (limit {limits.max_rows})", status=413, field="body"
        )
    # Every row's node first, so no row's bad value speaks before another row's refusal.
    nodes: list[NodeRef] = []
    for index, item in enumerate(items):
        row = index if isinstance(doc, list) else None
        if not isinstance(item, dict):
            raise IngestError("a reading must be a JSON object", field="body", row=row)
        nodes.append(check_node_ref(item.get("node"), "node", row))
        if authorize is not None:
            authorize(nodes[-1], row)
    rows: list[Row] = []
    for index, item in enumerate(items):
        row = index if isinstance(doc, list) else None
        if not isinstance(item, dict):
            raise IngestError("a reading must be a JSON object", field="body", row=row)
        unknown = set(item) - {"node", "time", "values"}
        if unknown:
            raise IngestError(
                f"unknown field(s) {', '.join(sorted(unknown))}", field=sorted(unknown)[0], row=row
            )
        node = nodes[index]
        values = item.get("values")
        if not isinstance(values, dict) or not values:
            raise IngestError(
                "values: must be a non-empty object of {key: number}", field="values", row=row
            )
        t = (
            check_time(parse_time_value(item["time"], "time", row), now, limits, "time", row)
            if item.get("time") is not None
            else int(now)
        )
        checked = {
            check_key(k, f"values.{k}"[:80], row): check_value(
                v, f"values.{k}"[:80], row, allow_text=False
            )
            for k, v in values.items()
        }
        rows.append(Row(node, t, checked))
    check_totals(rows, limits)
    return rows


# --- emoncms /input/post: sensors/ingest/emoncms_input.py (a bad value skipped, not refused) ----


# --- emoncms /input/bulk ---------------------------------------------------------------------------


def decompress_body(body: bytes, limits: Limits, *, field: str = "cb") -> bytes:
    """`cb=1`: the whole form body is zlib-compressed. Bounded, so a zip bomb is refused.

    `field`: the parameter that said the data is compressed (`c` for hex `data`), named in
    the errors so the client sees which of its parameters is wrong."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, limits.max_decompressed_bytes)
    except zlib.error as exc:
        raise IngestError(
            f"{field}: not valid zlib data with {field}=1 ({exc})", field=field
        ) from exc
    if inflater.unconsumed_tail:
        raise IngestError(
            f"{field}: decompresses to more than {limits.max_decompressed_bytes} bytes",
            status=413,
            field=field,
        )
    if not inflater.eof:
        raise IngestError(f"{field}: truncated zlib data with {field}=1", field=field)
    return out


def _reference_param(params: dict[str, str], name: str) -> float:
    try:
        value = numeric_text(params[name])
    except ValueError:
        raise IngestError(
            f"{name}: must be unix seconds, got {params[name][:40]!r}", field=name
        ) from None
    if not math.isfinite(value):
        raise IngestError(f"{name}: must be finite", field=name)
    return value


def parse_bulk(params: dict[str, str], now: float, limits: Limits) -> list[Row]:
    raw = params.get("data")
    if raw is None or not raw.strip():
        raise IngestError("data: missing (data=[[t, node, v1, ...], ...])", field="data")
    doc = loads_strict(raw, "data")
    if not isinstance(doc, list) or not doc:
        raise IngestError("data: must be a non-empty JSON list of rows", field="data")
    if len(doc) > limits.max_rows:
        raise IngestError(
            f"too many rows: {len(doc)} (limit {limits.max_rows}); split the batch",
            status=413,
            field="data",
        )
    for index, item in enumerate(doc):
        if not isinstance(item, list) or len(item) < 2:
            raise IngestError(
                "data: each row must be a list [t, node, values...]", field="data", row=index
            )
        if isinstance(item[0], bool) or not isinstance(item[0], int | float):
            raise IngestError("data: row time must be a number", field="data[0]", row=index)
        if finite_float(item[0]) is None:
            raise IngestError("data: row time is not finite", field="data[0]", row=index)
    # Time reference, as emoncms: sentat and offset both mean "the hub's clock read this when it
    # sent", so t + (server now - sentat) corrects the hub's clock; time= is an absolute base;
    # with none, the last row is taken to have arrived now.
    if params.get("sentat", "").strip():
        time_ref = now - _reference_param(params, "sentat")
    elif params.get("offset", "").strip():
        time_ref = now - _reference_param(params, "offset")
    elif params.get("time", "").strip():
        time_ref = _reference_param(params, "time")
    else:
        time_ref = now - doc[-1][0]
    rows: list[Row] = []
    for index, item in enumerate(doc):
        node = check_node_ref(item[1], "data[1]", index)
        values: dict[str, float] = {}
        name = 1
        for position, value in enumerate(item[2:], start=2):
            where = f"data[{position}]"
            if isinstance(value, dict):
                for key, v in value.items():
                    values[check_key(key, where, index)] = check_value(
                        v, f"{where}.{key}"[:80], index, allow_text=True
                    )
                continue
            if value is not None and value != "":
                values[str(name)] = check_value(value, where, index, allow_text=True)
            name += 1
        if not values:
            continue  # emoncms skips rows without values
        t = check_time(time_ref + item[0], now, limits, "data[0]", index)
        rows.append(Row(node, t, values))
    check_totals(rows, limits)
    return rows
