"""Modbus register maps: validation of a map as it is saved, and the maps we ship as data.

One place holds the rules (`validate_row`, `validate_register_map`), used by the model's clean()
(admin, API), the register-map API and the `modbus_meter` command. No Django here.

A map is a list of rows:
    {"key": "power", "address": 12, "function": "input", "data_type": "float32",
     "word_order": "ABCD", "scale": 1, "offset": 0, "count": 2, "name": "...", "unit": "W"}
`count`, if given, must be the number of registers the type takes. The shipped maps are JSON
files in sensors/devices/meter_maps/ (one per meter model, with the source of its addresses).
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from pathlib import Path

from sensors.devices.modbus_poll import (
    FUNCTIONS,
    MAX_ADDRESS,
    MAX_REGISTERS_PER_READ,
    REGISTER_COUNT,
    WORD_ORDERS,
)

MAX_ROWS = 200  # = models.MODBUS_MAX_REGISTERS_PER_METER
KEY_PATTERN = re.compile(r"^[\w\s.\-]{1,64}$")
ROW_FIELDS = {"key", "address", "function", "data_type", "word_order", "scale", "offset",
              "count", "name", "unit"}  # fmt: skip
MAPS_DIR = Path(__file__).with_name("meter_maps")


class RegisterMapError(ValueError):
    """A map row is wrong: `field` names the field, `row` the 0-based row (None: the whole map)."""

    def __init__(self, field: str, message: str, row: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.row = row

    def as_dict(self) -> dict:
        """The API's error shape (core/api_errors.py), plus the row."""
        where = "" if self.row is None else f"row {self.row}: "
        body = {"success": False, "error": f"{where}{self.field}: {self.message}",
                "fields": {self.field: [self.message]}, "field": self.field}  # fmt: skip
        if self.row is not None:
            body["row"] = self.row
        return body


def _number(row: dict, name: str, default: float) -> float:
    value = row.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RegisterMapError(name, f"{name} must be a finite number.")
    if abs(value) > 1e12:
        raise RegisterMapError(name, f"{name} must be within ±1e12.")
    return float(value)


def validate_row(row: dict) -> dict:
    """One row, normalised (defaults filled in). Raises RegisterMapError naming the field."""
    if not isinstance(row, dict):
        raise RegisterMapError("row", "Each register is an object.")
    unknown = sorted(set(row) - ROW_FIELDS)
    if unknown:
        raise RegisterMapError(unknown[0], f"Unknown field {unknown[0]!r}.")
    key = row.get("key")
    if not isinstance(key, str) or not KEY_PATTERN.match(key):
        raise RegisterMapError(
            "key", "key is 1–64 letters, digits, '_', '-', '.' or spaces (the input's key)."
        )
    function = row.get("function", "input")
    if function not in FUNCTIONS:
        raise RegisterMapError("function", f"function is one of {', '.join(FUNCTIONS)}.")
    data_type = row.get("data_type", "float32")
    if data_type not in REGISTER_COUNT:
        raise RegisterMapError("data_type", f"data_type is one of {', '.join(REGISTER_COUNT)}.")
    word_order = row.get("word_order", "ABCD")
    if word_order not in WORD_ORDERS:
        raise RegisterMapError("word_order", f"word_order is one of {', '.join(WORD_ORDERS)}.")
    count = REGISTER_COUNT[data_type]
    if "count" in row and row["count"] != count:
        raise RegisterMapError(
            "count", f"{data_type} takes {count} register(s), not {row['count']!r}."
        )
    address = row.get("address")
    if isinstance(address, bool) or not isinstance(address, int) or address < 0:
        raise RegisterMapError("address", "address is a whole number 0–65535 (0-based).")
    if address + count - 1 > MAX_ADDRESS:
        raise RegisterMapError(
            "address", f"address {address} + {count} register(s) passes the last one, 65535."
        )
    for text in ("name", "unit"):
        if text in row and (not isinstance(row[text], str) or len(row[text]) > 100):
            raise RegisterMapError(text, f"{text} is text of at most 100 characters.")
    if "unit" in row and len(row["unit"]) > 16:
        raise RegisterMapError("unit", "unit is at most 16 characters.")
    return {
        "key": key,
        "address": address,
        "function": function,
        "data_type": data_type,
        "word_order": word_order,
        "scale": _number(row, "scale", 1.0),
        "offset": _number(row, "offset", 0.0),
        "name": row.get("name", ""),
        "unit": row.get("unit", ""),
    }


def validate_register_map(rows: object) -> list[dict]:
    """A whole map: every row valid, names unique, at most MAX_ROWS rows."""
    if not isinstance(rows, list):
        raise RegisterMapError("registers", "registers is a list of register objects.")
    if not rows:
        raise RegisterMapError("registers", "registers holds at least one register.")
    if len(rows) > MAX_ROWS:
        raise RegisterMapError("registers", f"A meter has at most {MAX_ROWS} registers.")
    seen: dict[str, int] = {}
    clean = []
    for index, row in enumerate(rows):
        try:
            checked = validate_row(row)
        except RegisterMapError as exc:
            exc.row = index
            raise
        if checked["key"] in seen:
            raise RegisterMapError(
                "key", f"key {checked['key']!r} is also row {seen[checked['key']]}.", index
            )
        seen[checked["key"]] = index
        clean.append(checked)
    return clean


def validate_max_block(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 125:
        raise RegisterMapError("max_block", f"max_block is 1–{MAX_REGISTERS_PER_READ}.")
    return value


@cache
def shipped_maps() -> dict[str, dict]:
    """name -> map document, from sensors/devices/meter_maps/*.json (validated as they load)."""
    maps = {}
    for path in sorted(MAPS_DIR.glob("*.json")):
        document = json.loads(path.read_text())
        document["registers"] = validate_register_map(document["registers"])
        document["max_block"] = validate_max_block(document["max_block"])
        maps[document["name"]] = document
    return maps


def shipped_map(name: object) -> dict:
    maps = shipped_maps()
    if not isinstance(name, str) or name not in maps:
        raise RegisterMapError("template", f"template is one of {', '.join(sorted(maps))}.")
    return maps[name]
