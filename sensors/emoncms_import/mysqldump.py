"""Rows of chosen tables from a mysqldump file, read without executing anything.

emoncms's backup module makes `emoncms.sql` with a plain `mysqldump`: for each table a
`CREATE TABLE `name` (`col` type, ...)` block, then `INSERT INTO `name` VALUES (...),(...);`
lines (extended inserts, one statement per line, optionally with a column list). Only the
tables asked for are parsed; every other line is skipped, however long, without being held
in memory. The tokenizer knows exactly MySQL's literal forms mysqldump writes: NULL, numbers,
'strings' with backslash escapes (\\0 \\' \\" \\b \\n \\r \\t \\Z \\\\) or doubled quotes, and
0x hex. Anything else is a DumpError naming the line, never a guess.

Bounds: a statement of a wanted table may be at most `max_line` bytes and each table at most
`max_rows` rows; the caller bounds the file (sensors/emoncms_import/site.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import BinaryIO

DEFAULT_MAX_LINE = 64 * 1024 * 1024
DEFAULT_MAX_ROWS = 100_000
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


def read_tables(
    fh: BinaryIO,
    tables: Iterable[str],
    *,
    max_line: int = DEFAULT_MAX_LINE,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> dict[str, list[dict[str, Value]]]:
    """{table: [ {column: value} ]} for each wanted table (empty list when absent)."""
    wanted = {t.encode() for t in tables}
    columns: dict[bytes, list[str]] = {}
    rows: dict[bytes, list[dict[str, Value]]] = {t: [] for t in wanted}
    creating: bytes | None = None
    lineno = 0
    while True:
        line = fh.readline(max_line + 1)
        if not line:
            break
        lineno += 1
        if len(line) > max_line and not line.endswith(b"\n"):
            if _is_wanted_statement(line, wanted):
                raise DumpError(f"line {lineno}: a statement over {max_line} bytes")
            _skip_rest_of_line(fh)
            continue
        if creating is not None:
            if line.startswith(b")"):
                creating = None
            else:
                col = _COLUMN.match(line)
                if col:
                    columns[creating].append(col.group(1).decode("utf-8", "replace"))
            continue
        create = _CREATE.match(line)
        if create and create.group(1) in wanted:
            creating = create.group(1)
            columns[creating] = []
            continue
        insert = _INSERT.match(line)
        if insert and insert.group(1) in wanted:
            table = insert.group(1)
            names = (
                [c.strip().strip("`") for c in insert.group(3).decode().split(",")]
                if insert.group(2)
                else columns.get(table)
            )
            if not names:
                raise DumpError(f"line {lineno}: INSERT into {table.decode()} before its CREATE")
            text = line[insert.end() :].decode("utf-8", "replace")
            for values in _tuples(text, lineno):
                if len(values) != len(names):
                    raise DumpError(f"line {lineno}: {len(values)} values for {len(names)} columns")
                rows[table].append(dict(zip(names, values, strict=True)))
                if len(rows[table]) > max_rows:
                    raise DumpError(f"table {table.decode()}: more than {max_rows} rows")
    return {t.decode(): r for t, r in rows.items()}


def _is_wanted_statement(line: bytes, wanted: set[bytes]) -> bool:
    m = _INSERT.match(line) or _CREATE.match(line)
    return bool(m and m.group(1) in wanted)


def _skip_rest_of_line(fh: BinaryIO) -> None:
    while True:
        chunk = fh.readline(SKIP_CHUNK)
        if not chunk or chunk.endswith(b"\n"):
            return


def _tuples(text: str, lineno: int) -> Iterable[list[Value]]:
    """The value tuples of `(...),(...);`."""
    i, n = 0, len(text)
    while True:
        i = _skip_space(text, i)
        if i >= n or text[i] != "(":
            raise DumpError(f"line {lineno}: expected '(' at column {i}")
        i += 1
        values: list[Value] = []
        while True:
            i = _skip_space(text, i)
            value, i = _value(text, i, lineno)
            values.append(value)
            i = _skip_space(text, i)
            if i < n and text[i] == ",":
                i += 1
                continue
            if i < n and text[i] == ")":
                i += 1
                break
            raise DumpError(f"line {lineno}: expected ',' or ')' at column {i}")
        yield values
        i = _skip_space(text, i)
        if i < n and text[i] == ",":
            i += 1
            continue
        if i < n and text[i] == ";":
            return
        raise DumpError(f"line {lineno}: expected ',' or ';' at column {i}")


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _value(text: str, i: int, lineno: int) -> tuple[Value, int]:
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
        is_int = not any(c in literal for c in ".eE")
        return (int(literal) if is_int else float(literal)), number.end()
    raise DumpError(f"line {lineno}: unexpected {text[i : i + 20]!r} at column {i}")


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
    raise DumpError(f"line {lineno}: a string is not closed")
