"""Import the site energy model from CSV: all rows or none, a bad row named (docs/ENERGY.md).

    building,fuel,start,end,kwh
    Main office,gas,2024-01-01,2024-01-31,12000

building: the name (or id) of a building node of the site; start/end: ISO dates, end
inclusive; kwh: expected use over the period (water: m³). A row for the same building, fuel
and start replaces the stored one.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import date

from django.core.exceptions import ValidationError
from django.db import transaction

from energy import benchmarks
from energy.models import ExpectedUse, MeterNode
from energy.validation import check_expected_overlap

MAX_BYTES = 1_000_000
MAX_ROWS = 10_000
COLUMNS = ("building", "fuel", "start", "end", "kwh")


class BadModelCsv(ValueError):
    def __init__(self, message: str, row: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.row, self.field = row, field


def _bad(row: int, field: str, message: str) -> BadModelCsv:
    return BadModelCsv(f"row {row}, {field}: {message}", row, field)


def parse(raw: bytes, site) -> list[ExpectedUse]:
    if len(raw) > MAX_BYTES:
        raise BadModelCsv(f"file is larger than {MAX_BYTES} bytes", field="file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadModelCsv("file is not UTF-8 text", field="file") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise BadModelCsv(f"header lacks column(s) {', '.join(missing)}", row=1, field="header")
    reader.fieldnames = header
    buildings = {n.name: n for n in MeterNode.objects.filter(site=site)}
    by_id = {str(n.pk): n for n in buildings.values()}
    out: list[ExpectedUse] = []
    seen: dict[tuple, int] = {}
    for number, rec in enumerate(reader, start=2):  # row 1 is the header
        if number - 1 > MAX_ROWS:
            raise BadModelCsv(f"more than {MAX_ROWS} rows", row=number, field="file")
        rec = {k: (v or "").strip() for k, v in rec.items() if k}
        name = rec["building"]
        node = buildings.get(name) or by_id.get(name)
        if node is None:
            raise _bad(number, "building", f"no node {name!r} at site '{site}'")
        if node.kind != MeterNode.Kind.BUILDING:
            raise _bad(number, "building", f"'{name}' is a {node.kind}: the model is per building")
        fuel = rec["fuel"].lower()
        if fuel not in benchmarks.FUELS:
            raise _bad(number, "fuel", f"{fuel!r}: use one of {', '.join(benchmarks.FUELS)}")
        start = _date(number, "start", rec["start"])
        end = _date(number, "end", rec["end"])
        try:
            value = float(rec["kwh"])
        except ValueError:
            raise _bad(number, "kwh", f"{rec['kwh']!r} is not a number") from None
        if not math.isfinite(value) or not 0 <= value <= 1e12:
            raise _bad(number, "kwh", f"{rec['kwh']!r}: must be between 0 and 1e12")
        row = ExpectedUse(node=node, fuel=fuel, start=start, end=end, value=value)
        try:
            row.clean()
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise _bad(number, field, messages[0]) from None
        key = (node.pk, fuel)
        for other in out:
            if (other.node.pk, other.fuel) == key and other.start <= end and other.end >= start:
                raise _bad(number, "start", f"overlaps row {seen[id(other)]}")
        seen[id(row)] = number
        out.append(row)
    if not out:
        raise BadModelCsv("no rows under the header", row=2, field="file")
    return out


def _date(number: int, field: str, raw: str) -> date:
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise _bad(number, field, f"{raw!r} is not a date (YYYY-MM-DD)") from None


def store(rows: list[ExpectedUse]) -> int:
    """Replace rows with the same building, fuel and start; refuse overlaps with others."""
    with transaction.atomic():
        for number, row in enumerate(rows, start=2):
            ExpectedUse.objects.filter(node=row.node, fuel=row.fuel, start=row.start).delete()
            try:
                check_expected_overlap(row)
            except ValidationError as exc:
                raise _bad(number, "start", exc.message_dict["start"][0]) from None
            row.save()
    return len(rows)
