"""Rows of chosen tables from a mysqldump file, read without executing anything.

emoncms's backup module makes `emoncms.sql` with a plain `mysqldump`: for each table a
`CREATE TABLE `name` (`col` type, ...)` block, then `INSERT INTO `name` VALUES (...),(...);`
lines (extended inserts, one statement per line, optionally with a column list). Only the
tables asked for are parsed; every other line is skipped, however long, without being held
in memory. The tokenizer knows exactly MySQL's literal forms mysqldump writes: NULL, numbers,
'strings' with backslash escapes (\\0 \\' \\" \\b \\n \\r \\t \\Z \\\\) or doubled quotes, and
0x hex. Anything else is a DumpError naming the line, never a guess.

Bounds, so that memory is bounded per statement and per row whatever the dump holds (a
crafted 2.5 MB backup, a table of a million columns, took the import to 836 MB):

- a statement of a wanted table may be at most `max_line` bytes (16 MiB; mysqldump splits its
  extended inserts at net_buffer_length, 1 MiB by default): a longer one is skipped, read in
  chunks and never held;
- a wanted table may have at most `max_columns` columns (emoncms's have 8 and 16): a wider
  CREATE TABLE or column list leaves that table's rows unread;
- a row may span at most `max_row_bytes` of dump text and hold no more values than its table
  has columns: values past either bound are scanned, not kept, and the row is skipped;
- a number literal may have at most MAX_NUMBER_CHARS characters (a 5,000-digit integer hit
  Python's int() limit: a traceback);
- each table at most `max_rows` rows; the caller bounds the file (sensors/emoncms_import/site.py).

Given a `problems` list, whatever is skipped (a row, the rest of a statement, a table) is one
line in it and reading goes on; without one, the first such thing is a DumpError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

DEFAULT_MAX_LINE = 16 * 1024 * 1024
DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_COLUMNS = 256
DEFAULT_MAX_ROW_BYTES = 4096
# A BIGINT has at most 20 digits, a DOUBLE as mysqldump writes it about 25 characters.
MAX_NUMBER_CHARS = 64
SKIP_CHUNK = 1 << 20

Value = str | int | float | bytes | None

_CREATE = re.compile(rb"^CREATE TABLE (?:IF NOT EXISTS )?`([^`]+)` \(")
_COLUMN = re.compile(rb"^\s*`([^`]+)`\s")
_INSERT = re.compile(rb"^INSERT (?:IGNORE )?INTO `([^`]+)`\s*(\(([^)]*)\))?\s*VALUES\s*")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_HEX = re.compile(r"0x([0-9A-Fa-f]*)")
_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t",
            "Z": "\x1a", "\\": "\\", "%": "\\%", "_": "\\_"}  # fmt: skip


class DumpError(ValueError):
    """The dump is not what mysqldump writes (or exceeds a bound); the message names the line."""


@dataclass(frozen=True)
class _Bad:
    """A value that cannot be kept (named in the row's report line)."""

    why: str


@dataclass(frozen=True)
class _Row:
    values: list[Value]
    problem: str  # "" for a good row


def read_tables(
    fh: BinaryIO,
    tables: Iterable[str],
    *,
    max_line: int = DEFAULT_MAX_LINE,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_columns: int = DEFAULT_MAX_COLUMNS,
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
    problems: list[str] | None = None,
) -> dict[str, list[dict[str, Value]]]:
    """{table: [ {column: value} ]} for each wanted table (empty list when absent).

    With `problems`, a skipped row, statement or table is reported there (one line each)
    instead of ending the read with a DumpError; `max_rows` is a DumpError either way."""

    def skipped(message: str) -> None:
        if problems is None:
            raise DumpError(message)
        problems.append(message)

    wanted = {t.encode() for t in tables}
    columns: dict[bytes, list[str]] = {}
    too_wide: set[bytes] = set()  # tables whose definition was over max_columns
    rows: dict[bytes, list[dict[str, Value]]] = {t: [] for t in wanted}
    creating: bytes | None = None
    lineno = 0
    while True:
        line = fh.readline(max_line + 1)
        if not line:
            break
        lineno += 1
        if len(line) > max_line and not line.endswith(b"\n"):
            wanted_statement = _is_wanted_statement(line, wanted)
            del line  # the bound is on what is held: the rest is read in chunks and dropped
            _skip_rest_of_line(fh)
            if wanted_statement:
                skipped(f"line {lineno}: a statement over {max_line} bytes skipped")
            continue
        if creating is not None:
            if line.startswith(b")"):
                creating = None
            elif creating not in too_wide and (col := _COLUMN.match(line)):
                if len(columns[creating]) >= max_columns:
                    too_wide.add(creating)
                    columns[creating] = []
                    skipped(f"table {creating.decode('utf-8', 'replace')}: more than "
                            f"{max_columns} columns, its rows are not read")  # fmt: skip
                else:
                    columns[creating].append(col.group(1).decode("utf-8", "replace"))
            continue
        create = _CREATE.match(line)
        if create and create.group(1) in wanted:
            creating = create.group(1)
            columns[creating] = []
            too_wide.discard(creating)
            continue
        insert = _INSERT.match(line)
        if not (insert and insert.group(1) in wanted):
            continue
        table = insert.group(1)
        label = f"line {lineno}"
        if table in too_wide:
            continue  # said once, at its CREATE TABLE
        if insert.group(2):
            names = [c.strip().strip("`") for c in
                     insert.group(3).decode("utf-8", "replace").split(",", max_columns)]  # fmt: skip
            if len(names) > max_columns:
                skipped(f"{label}: a column list of more than {max_columns} names: "
                        "statement skipped")  # fmt: skip
                continue
        else:
            names = columns.get(table, [])
        if not names:
            skipped(f"{label}: INSERT into {table.decode()} before its CREATE: statement skipped")
            continue
        # Decoded from a view of the line: no second copy of the statement's bytes.
        text = str(memoryview(line)[insert.end() :], "utf-8", "replace")
        del line
        try:
            for number, row in enumerate(_tuples(text, lineno, len(names), max_row_bytes), 1):
                if row.problem:
                    skipped(f"{label}: row {number} skipped: {row.problem}")
                    continue
                rows[table].append(dict(zip(names, row.values, strict=True)))
                if len(rows[table]) > max_rows:
                    raise DumpError(f"table {table.decode()}: more than {max_rows} rows")
        except _Unreadable as exc:
            skipped(f"{exc}: the rest of this statement is skipped")
    return {t.decode(): r for t, r in rows.items()}


class _Unreadable(DumpError):
    """A literal mysqldump does not write: the statement cannot be followed past it."""


def _is_wanted_statement(line: bytes, wanted: set[bytes]) -> bool:
    m = _INSERT.match(line) or _CREATE.match(line)
    return bool(m and m.group(1) in wanted)


def _skip_rest_of_line(fh: BinaryIO) -> None:
    while True:
        chunk = fh.readline(SKIP_CHUNK)
        if not chunk or chunk.endswith(b"\n"):
            return


def _tuples(text: str, lineno: int, width: int, max_row_bytes: int) -> Iterator[_Row]:
    """The value tuples of `(...),(...);`, each holding at most `width` values: the values of
    a row over `width` or over `max_row_bytes` of text are scanned but not kept."""
    i, n = 0, len(text)
    while True:
        i = _skip_space(text, i)
        if i >= n or text[i] != "(":
            raise _Unreadable(f"line {lineno}: expected '(' at column {i}")
        start = i
        i += 1
        values: list[Value] = []
        count = 0
        problem = ""
        while True:
            i = _skip_space(text, i)
            value, i = _value(text, i, lineno)
            count += 1
            if isinstance(value, _Bad) and not problem:
                problem = value.why
            if count <= width and i - start <= max_row_bytes:
                values.append(value)
            i = _skip_space(text, i)
            if i < n and text[i] == ",":
                i += 1
                continue
            if i < n and text[i] == ")":
                i += 1
                break
            raise _Unreadable(f"line {lineno}: expected ',' or ')' at column {i}")
        # A bad value, when there is one, says best why the row is skipped.
        if not problem and count != width:
            problem = f"{count} values for {width} columns"
        elif not problem and i - start > max_row_bytes:
            problem = f"{i - start} bytes of dump text (at most {max_row_bytes})"
        yield _Row([] if problem else values, problem)
        i = _skip_space(text, i)
        if i < n and text[i] == ",":
            i += 1
            continue
        if i < n and text[i] == ";":
            return
        raise _Unreadable(f"line {lineno}: expected ',' or ';' at column {i}")


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _value(text: str, i: int, lineno: int) -> tuple[Value | _Bad, int]:
    if text.startswith("NULL", i):
        return None, i + 4
    if text.startswith("_binary '", i):
        i += len("_binary ")
    if i < len(text) and text[i] == "'":
        return _string(text, i + 1, lineno)
    hexa = _HEX.match(text, i)
    if hexa:
        return bytes.fromhex(hexa.group(1)), hexa.end()
    number = _NUMBER.match(text, i)
    if number:
        literal = number.group(0)
        if len(literal) > MAX_NUMBER_CHARS:
            return _Bad(f"a number of {len(literal)} characters"), number.end()
        is_int = not any(c in literal for c in ".eE")
        return (int(literal) if is_int else float(literal)), number.end()
    raise _Unreadable(f"line {lineno}: unexpected {text[i : i + 20]!r} at column {i}")


def _string(text: str, i: int, lineno: int) -> tuple[str, int]:
    out: list[str] = []
    start = i
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 >= n:
                break
            out.append(text[start:i])
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
            start = i
        elif c == "'":
            if i + 1 < n and text[i + 1] == "'":  # '' is a quote inside the string
                out.append(text[start : i + 1])
                i += 2
                start = i
            else:
                out.append(text[start:i])
                return "".join(out), i + 1
        else:
            i += 1
    raise _Unreadable(f"line {lineno}: a string is not closed")
