"""Import the site energy model from CSV: all rows or none, a bad row named (docs/ENERGY.md).

    building,fuel,start,end,kwh[,unit]
    Main office,gas,2024-01-01,2024-01-31,12000

building: the name (or id) of a building node of the site; start/end: ISO dates from
1970-01-01 to 2100-12-31, end inclusive; kwh: expected use over the period in the fuel's unit
(water: m³); unit (optional column, may be empty): the fuel's unit, `kWh` or `m³` (`m3`), a
check that the figures are what the model thinks they are. A row for the same building, fuel
and start replaces the stored one; two rows of the file for the same building and fuel may not
overlap, nor a row and a stored period it does not replace.

Linear in the rows (the outside tester timed 10,000 rows at 31.5 s): the file's rows are
counted before any is checked, overlaps are found by sorting each building's and fuel's periods
by start, and the stored model is read in one query and written with one delete and one bulk
insert.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from datetime import date

from django.core.exceptions import ValidationError
from django.db import transaction

from energy import benchmarks
from energy.consumption import FIRST_DATE, LAST_DATE
from energy.models import ExpectedUse, MeterNode

MAX_BYTES = 1_000_000
MAX_ROWS = 10_000
COLUMNS = ("building", "fuel", "start", "end", "kwh")
OPTIONAL = ("unit",)
# what the optional unit column may say for each fuel's unit (compared lower-case, no spaces)
UNIT_SPELLINGS = {"kWh": {"kwh"}, "m³": {"m³", "m3"}}
_BATCH = 500


class BadModelCsv(ValueError):
    def __init__(self, message: str, row: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.row, self.field = row, field


def _bad(row: int, field: str, message: str) -> BadModelCsv:
    return BadModelCsv(f"row {row}, {field}: {message}", row, field)


def _records(raw: bytes) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the non-blank records with their row numbers; more than MAX_ROWS is
    refused before any row is checked."""
    if len(raw) > MAX_BYTES:
        raise BadModelCsv(f"file is larger than {MAX_BYTES} bytes", field="file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadModelCsv("file is not UTF-8 text", field="file") from None
    stream = io.StringIO(text)
    reader = csv.reader(stream)
    header: list[str] = []
    records = []
    start = 0  # where the record being read begins, to name the column of a csv.Error
    try:
        header = [h.strip().lower() for h in next(reader, [])]
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise BadModelCsv(f"header lacks column(s) {', '.join(missing)}", row=1, field="header")
        start = stream.tell()
        for cells in reader:
            start = stream.tell()
            if not any(c.strip() for c in cells):
                continue  # a blank line
            # the row number a spreadsheet shows (row 1 is the header): csv.reader counts lines
            records.append((reader.line_num, cells))
            if len(records) > MAX_ROWS:
                raise BadModelCsv(f"more than {MAX_ROWS} rows", row=reader.line_num, field="file")
    except csv.Error as exc:
        # A cell over csv.field_size_limit() (131,072 characters) or a stray NUL: the reader
        # stops mid-record. It was a 500; it is a bad row like any other, named with its column.
        raise _csv_error(exc, text, start, reader.line_num, header) from None
    if not records:
        raise BadModelCsv("no rows under the header", row=2, field="file")
    return header, records


def _csv_error(exc: csv.Error, text: str, start: int, line: int, header: list[str]) -> BadModelCsv:
    """A BadModelCsv for csv.reader's error in the record that begins at `text[start]`: for an
    over-long cell, the column it is in (counted with the same quoting rules) and its length."""
    row = max(line, 1)
    limit = csv.field_size_limit()
    if "field larger than field limit" not in str(exc):
        return BadModelCsv(f"row {row}, file: not readable as CSV ({exc})", row, "file")
    column, length, quoted = 0, 0, False
    for char in text[start:]:
        if char == '"':
            quoted = not quoted
            continue
        if not quoted and char == ",":
            column, length = column + 1, 0
            continue
        if not quoted and char in "\r\n":
            column, length = 0, 0  # a record that ended within the limit
            continue
        length += 1
        if length > limit:
            break
    field = header[column] if header and column < len(header) and header[column] else "file"
    if not header:
        field = "header"
    return BadModelCsv(f"row {row}, {field}: a cell longer than {limit} characters", row, field)


def parse(raw: bytes, site) -> list[ExpectedUse]:
    header, records = _records(raw)
    index = {name: i for i, name in enumerate(header) if name}
    unknown = [h for h in header if h and h not in (*COLUMNS, *OPTIONAL)]
    if unknown:  # not read, so not silently ignored either (e.g. "units", "kwh (m3)")
        raise BadModelCsv(
            f"unknown column(s) {', '.join(unknown)}: the columns are "
            f"{', '.join(COLUMNS)} and optionally {', '.join(OPTIONAL)}", row=1, field="header",
        )  # fmt: skip
    buildings = {n.name: n for n in MeterNode.objects.filter(site=site)}
    by_id = {str(n.pk): n for n in buildings.values()}
    out: list[ExpectedUse] = []
    numbers: list[int] = []
    for number, cells in records:
        # a filled cell with no column name over it would be dropped: refuse it
        extra = [
            c for i, c in enumerate(cells) if c.strip() and (i >= len(header) or not header[i])
        ]
        if extra:
            raise _bad(number, "file", f"{extra[0].strip()[:40]!r} is beyond the header's "
                       f"columns ({', '.join(h for h in header if h)})")  # fmt: skip
        rec = {name: (cells[i].strip() if i < len(cells) else "") for name, i in index.items()}
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
        unit = rec.get("unit", "")
        expected_unit = benchmarks.UNIT[fuel]
        if unit and unit.replace(" ", "").lower() not in UNIT_SPELLINGS[expected_unit]:
            raise _bad(number, "unit", f"{unit[:20]!r}: {fuel} is in {expected_unit}")
        row = ExpectedUse(node=node, fuel=fuel, start=start, end=end, value=value)
        try:
            row.clean()
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise _bad(number, field, messages[0]) from None
        out.append(row)
        numbers.append(number)
    _check_file_overlaps(out, numbers)
    for row, number in zip(out, numbers, strict=True):
        row._csv_row = number  # store() names the row of a clash with the stored model
    return out


def _check_file_overlaps(rows: list[ExpectedUse], numbers: list[int]) -> None:
    """Two rows of the file for the same building and fuel may not overlap (a duplicate row is
    an overlap too): sorted by start per building and fuel, a period overlaps the ones before
    it exactly when it starts on or before the latest end so far. The first clash in the file's
    order is named: 'row 3, start: overlaps row 2'."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[(row.node.pk, row.fuel)].append(i)
    clash: tuple[int, int] | None = None  # (later row, earlier row)
    for members in groups.values():
        members.sort(key=lambda i: (rows[i].start, numbers[i]))
        latest = None  # index of the period with the latest end so far
        for i in members:
            if latest is not None and rows[i].start <= rows[latest].end:
                found = (max(numbers[i], numbers[latest]), min(numbers[i], numbers[latest]))
                clash = found if clash is None or found < clash else clash
            if latest is None or rows[i].end > rows[latest].end:
                latest = i
    if clash is not None:
        raise _bad(clash[0], "start", f"overlaps row {clash[1]}")


def _date(number: int, field: str, raw: str) -> date:
    try:
        value = date.fromisoformat(raw)
    except ValueError:
        raise _bad(number, field, f"{raw!r} is not a date (YYYY-MM-DD)") from None
    if not FIRST_DATE <= value <= LAST_DATE:
        raise _bad(number, field, f"{raw} is outside {FIRST_DATE}..{LAST_DATE}")
    return value


def store(rows: list[ExpectedUse]) -> int:
    """Replace rows with the same building, fuel and start; refuse overlaps with others.

    One query reads the stored periods of the buildings and fuels in the file; per building
    and fuel the file's periods and the stored ones it does not replace are sorted by start
    and checked in one pass; then one delete (of the replaced) and one bulk insert."""
    if not rows:
        return 0
    new_keys = {(r.node_id, r.fuel, r.start) for r in rows}
    with transaction.atomic():
        stored = list(
            ExpectedUse.objects.select_for_update()
            .filter(node_id__in={r.node_id for r in rows}, fuel__in={r.fuel for r in rows})
            .only("pk", "node_id", "fuel", "start", "end")
        )
        replaced = [s.pk for s in stored if (s.node_id, s.fuel, s.start) in new_keys]
        kept: dict[tuple, list[ExpectedUse]] = defaultdict(list)
        for s in stored:
            if (s.node_id, s.fuel, s.start) not in new_keys:
                kept[(s.node_id, s.fuel)].append(s)
        _check_stored_overlaps(rows, kept)
        for i in range(0, len(replaced), _BATCH):
            ExpectedUse.objects.filter(pk__in=replaced[i : i + _BATCH]).delete()
        ExpectedUse.objects.bulk_create(rows, batch_size=_BATCH)
    return len(rows)


def _check_stored_overlaps(rows: list[ExpectedUse], kept: dict[tuple, list]) -> None:
    """A row of the file may not overlap a stored period it does not replace (the file's rows
    do not overlap each other: parse() checked). The first such row of the file is named."""
    groups: dict[tuple, list[ExpectedUse]] = defaultdict(list)
    for row in rows:
        groups[(row.node_id, row.fuel)].append(row)
    clash: tuple[int, ExpectedUse, ExpectedUse] | None = None
    for key, new in groups.items():
        old = kept.get(key)
        if not old:
            continue
        # both sorted by start; the stored periods do not overlap each other either
        new.sort(key=lambda r: r.start)
        old.sort(key=lambda r: r.start)
        j = 0
        for row in new:
            while j < len(old) and old[j].end < row.start:
                j += 1  # ends before this row (and so before every later one) starts
            if j < len(old) and old[j].start <= row.end:
                number = getattr(row, "_csv_row", 0)
                if clash is None or number < clash[0]:
                    clash = (number, row, old[j])
    if clash is not None:
        number, row, other = clash
        raise _bad(number, "start",
                   f"overlaps the model period {other.start}..{other.end} of '{row.node}'")  # fmt: skip
