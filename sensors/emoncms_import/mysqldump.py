"""Rows of chosen tables from a mysqldump file, read without executing anything.

emoncms's backup module makes `emoncms.sql` with a plain `mysqldump emoncms` (emoncms/backup,
emoncms-export.sh), and what that writes depends on the server and the options:

- MariaDB's mysqldump (emonSD images) writes `INSERT INTO `t` VALUES` and then one row per
  line, `(...),` ... `(...);`; MySQL's writes the whole statement on one line;
- `--skip-extended-insert` writes one statement per row, `--complete-insert` names the
  columns, `--insert-ignore` and `--replace` write `INSERT IGNORE` and `REPLACE`;
- `--hex-blob` writes binary columns as 0x..., MySQL 8 as `_binary '...'`, MariaDB as a
  string of the raw bytes; `--compatible=ansi` quotes names with "..." and drops SET NAMES;
- every dump has `--` comments and `/*!40101 ... */;` (MariaDB also `/*M!999999\\- ... */`
  with no `;` after it), `LOCK TABLES`, `DROP TABLE` and other statements we skip, and a
  table with triggers has them between `DELIMITER ;;` and `DELIMITER ;`, `;` inside.

So the file is read as SQL text, a statement at a time (`_Statements`): strings, quoted names
and comments are followed, so a `;` or a newline inside a string never ends a statement and a
row may span any number of lines. An executable comment `/*!NNNNN ...*/` is read as the SQL it
holds (that is where `SET NAMES` is), except MariaDB's `/*M!999999` which no server runs. Only
statements of the wanted tables are held; every other one is scanned, however long, and
dropped. A held statement is then read by a small tokenizer of MySQL's literal syntax: NULL,
numbers, 'strings' with every backslash escape (\\0 \\' \\" \\b \\n \\r \\t \\Z \\\\ \\% \\_)
and '' doubling, 0x.. and X'..' hex, b'..' bits, and _binary/_utf8mb4 introducers. Strings are
text in the dump's SET NAMES character set (UTF-8 when none is declared, and Windows-1252 for a
value that is not UTF-8: `--compatible=ansi` dumps in latin1); a binary literal, or a string in
a BLOB/BINARY column, stays bytes. Anything else is a DumpError naming the line, never a guess.
A dump made with `--no-create-info` and without `--complete-insert` does not say which value is
which column: its rows are reported, not matched by position (emoncms's column order differs
between sites that were created and ones that were upgraded). Without a CREATE TABLE a BLOB
that MariaDB writes as a plain string is read as text (emoncms's tables have no BLOB).

Bounds, so that memory is bounded per statement and per row whatever the dump holds (a
crafted 2.5 MB backup, a table of a million columns, took the import to 836 MB):

- a statement of a wanted table may be at most `max_statement` bytes (16 MiB; mysqldump splits
  its extended inserts at net_buffer_length, 1 MiB by default): a longer one is skipped,
  scanned in chunks and never held;
- a wanted table may have at most `max_columns` columns (emoncms's have 8 and 14): a wider
  CREATE TABLE or column list leaves that table's rows unread; of a CREATE TABLE at most
  MAX_CREATE_BYTES are held (a 256-column definition is a few KiB);
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

DEFAULT_MAX_STATEMENT = 16 * 1024 * 1024
DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_COLUMNS = 256
DEFAULT_MAX_ROW_BYTES = 4096
MAX_CREATE_BYTES = 1024 * 1024
# A BIGINT has at most 20 digits, a DOUBLE as mysqldump writes it about 25 characters.
MAX_NUMBER_CHARS = 64
# What is held of a statement before it is known whether it is wanted: enough for
# `INSERT IGNORE INTO `<64-character name>`` or `SET NAMES utf8mb4 COLLATE ...`.
HEAD_BYTES = 1024
CHUNK = 1 << 20
# MariaDB's `/*M!999999\- enable the sandbox mode */`: a version no server reaches, so no
# server runs it; a real version's executable comment is SQL.
NEVER_RUN_VERSION = 999_999

Value = str | int | float | bytes | None

_IDENT = rb"(`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[A-Za-z0-9_$]+)"
_QUALIFIED = rb"(?:" + _IDENT.replace(b"(", b"(?:", 1) + rb"\s*\.\s*)?" + _IDENT
_INSERT = re.compile(
    rb"(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*\s+(?:INTO\s+)?"
    + _QUALIFIED,
    re.I,
)
_CREATE = re.compile(
    rb"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    + _QUALIFIED
    + rb"\s*\(",
    re.I,
)
_SET_NAMES = re.compile(rb"SET\s+NAMES\s+['\"]?([A-Za-z0-9_]+)", re.I)
_VALUES = re.compile(rb"VALUES?(?![A-Za-z0-9_$])", re.I)
_SPACE = re.compile(rb"\s*")
_NAME = re.compile(rb"\s*" + _IDENT + rb"\s*")

# A run of statement text holding only whole strings and names: what the scanner passes in
# one step (a dump is mostly this). It stops before `;`, a comment, or a quote not closed in
# the buffer (the chunk ends inside it), which the scanner then takes a token at a time.
# Possessive (*+): a plain * keeps a backtracking entry per step, 150 MB for a 1 MiB chunk.
_RUN = re.compile(
    rb"(?:[^;'\"`#/*-]++|'(?:[^'\\]++|\\.|'')*+'|`(?:[^`]++|``)*+`"
    rb"|\"(?:[^\"\\]++|\\.|\"\")*+\"|-(?=[^-])|/(?=[^*])|\*(?=[^/]))*+",
    re.S,
)
# What changes the scanner's state outside strings and comments.
_OUTSIDE = re.compile(rb"[;'\"`#]|--|/\*|\*/")
_STRING_END = {
    ord("'"): re.compile(rb"[\\']"),
    ord('"'): re.compile(rb'[\\"]'),
    ord("`"): re.compile(rb"`"),
}
_VERSION = re.compile(rb"M?!(\d{0,9})")  # more digits are text: int() has a limit
# The client's command around triggers (`mysqldump --triggers`, on by default): `DELIMITER ;;`,
# a trigger whose body holds `;`s, `;;`, `DELIMITER ;`.
_DELIMITER = re.compile(rb"\s*DELIMITER[ \t]+(\S+)[ \t]*(?:\r?\n|$)", re.I)
DELIMITER_LOOKAHEAD = 256

_LITERAL = re.compile(
    rb"(?P<null>(?i:NULL))(?![A-Za-z0-9_$])"
    rb"|(?:_(?P<cs>[A-Za-z0-9]+)\s*)?(?:"
    rb"(?P<hex>0x[0-9A-Fa-f]*|[Xx]'[0-9A-Fa-f]*')"
    rb"|(?P<bits>0b[01]+|[Bb]'[01]*')"
    rb"|(?P<str>[Nn]?'))"
    rb"|(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
)
_IN_STRING = re.compile(rb"[\\']")
_ESCAPES = {
    ord("0"): b"\0", ord("'"): b"'", ord('"'): b'"', ord("b"): b"\b", ord("n"): b"\n",
    ord("r"): b"\r", ord("t"): b"\t", ord("Z"): b"\x1a", ord("\\"): b"\\",
    # LIKE's wildcards keep their backslash (MySQL's reference, "String Literals").
    ord("%"): b"\\%", ord("_"): b"\\_",
}  # fmt: skip
# MySQL's names for the character sets a dump declares, as Python knows them; MySQL's
# "latin1" is Windows-1252.
_CHARSETS = {"utf8": "utf-8", "utf8mb3": "utf-8", "utf8mb4": "utf-8", "latin1": "cp1252",
             "ascii": "ascii", "latin2": "iso8859-2", "cp1250": "cp1250", "cp1251": "cp1251",
             "greek": "iso8859-7", "hebrew": "iso8859-8", "koi8r": "koi8-r"}  # fmt: skip
_BINARY_TYPES = {b"binary", b"varbinary", b"tinyblob", b"blob", b"mediumblob", b"longblob",
                 b"bit"}  # fmt: skip
# Words that start a CREATE TABLE line that is not a column.
_NOT_COLUMNS = {b"primary", b"key", b"index", b"unique", b"constraint", b"fulltext",
                b"spatial", b"foreign", b"check", b"period", b"system"}  # fmt: skip
_DEFINITION_TOKEN = re.compile(
    rb"\s*(?:(`(?:[^`]|``)*`|\"(?:[^\"\\]|\\.|\"\")*\")|'(?:[^'\\]|\\.|'')*'"
    rb"|([(),])|([^\s`\"'(),]+))",
    re.S,
)


class DumpError(ValueError):
    """The dump is not what mysqldump writes (or exceeds a bound); the message names the line."""


class _Unreadable(DumpError):
    """A literal mysqldump does not write: the statement cannot be followed past it."""


@dataclass(frozen=True)
class _Bad:
    """A value that cannot be kept (named in the row's report line)."""

    why: str


@dataclass(frozen=True)
class _Row:
    line: int
    values: list[Value]
    problem: str  # "" for a good row


@dataclass
class _Statement:
    line: int  # where its first character is
    text: bytearray  # at most the limit it was given; newlines kept, comments blanked
    over: bool  # longer than its limit: `text` is only its beginning


def _name(quoted: bytes) -> str:
    """A table or column name as written (`x`, "x" or x), unquoted."""
    if quoted[:1] in (b"`", b'"'):
        q = quoted[:1]
        quoted = quoted[1:-1].replace(q + q, q)
    return quoted.decode("utf-8", "replace")


class _Statements:
    """The statements of a dump, each with the line it starts on; only those `limit_for` gives
    a limit (from their first HEAD_BYTES) are held, up to that limit."""

    def __init__(self, fh: BinaryIO, limit_for: Callable[[bytes], int]) -> None:
        self.fh = fh
        self.limit_for = limit_for
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.line = 1
        self.conditional = False  # inside `/*!NNNNN ... */`, whose content is SQL
        # What ends a statement. mysqldump only ever sets `;;`; another delimiter (a person's
        # `$$`) is not followed, and `;` is kept.
        self.delimiter = b";"
        self._new_statement()

    def _new_statement(self) -> None:
        self.held = bytearray()
        self.started = False
        self.start_line = self.line
        self.limit: int | None = None  # None: not decided yet
        self.over = False

    def _more(self) -> bool:
        """Read the next chunk, dropping what was consumed; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.fh.read(CHUNK)
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        self.eof = not chunk
        return bool(chunk)

    def _advance(self, to: int, keep: bool = True) -> None:
        """Move to `to`, holding the text passed (or, for a comment, a blank with its newlines,
        so that a row's line number stays right)."""
        newlines = self.buf.count(b"\n", self.pos, to)
        if self.limit == 0 or self.over:  # nothing more is held of this statement
            self.line += newlines
            self.pos = to
            return
        piece = self.buf[self.pos : to]
        if not keep:
            piece = b" " + b"\n" * newlines if self.started else b""
        elif not self.started:
            body = piece.lstrip()
            if body:
                self.started = True
                self.start_line = self.line + piece.count(b"\n", 0, len(piece) - len(body))
            piece = body
        self.line += newlines
        self.pos = to
        if piece:
            self._hold(piece)

    def _hold(self, piece: bytes) -> None:
        if self.limit is None:
            self.held += piece
            if len(self.held) >= HEAD_BYTES:
                self._decide()
            return
        room = self.limit - len(self.held)
        self.held += piece[:room]
        if len(piece) > room:
            self.over = True

    def _decide(self) -> None:
        self.limit = self.limit_for(bytes(self.held[:HEAD_BYTES]))
        if self.limit == 0:
            self.held = bytearray()
        elif len(self.held) > self.limit:
            del self.held[self.limit :]
            self.over = True

    def _end(self) -> _Statement | None:
        statement = None
        if self.started:
            if self.limit is None:
                self._decide()
            if self.limit:
                statement = _Statement(self.start_line, self.held, self.over)
        self._new_statement()
        return statement

    def _need(self, end: int) -> bool:
        """True when bytes up to `end` are not in the buffer yet but the file has more (read
        them first: a token may be cut by the chunk boundary)."""
        return end > len(self.buf) and not self.eof

    def __iter__(self) -> Iterator[_Statement]:
        state: int | bytes | None = None  # a quote byte in a string or name; b"--", b"/*"
        while True:
            if self.pos >= len(self.buf) and not self._more():
                if (statement := self._end()) is not None:
                    yield statement
                return
            buf = self.buf
            if state is None and not self.started:
                if self._need(self.pos + DELIMITER_LOOKAHEAD):
                    self._more()
                    continue
                if delimiter := _DELIMITER.match(buf, self.pos):
                    self._advance(delimiter.end(), keep=False)
                    new = delimiter.group(1)
                    self.delimiter = new if new.strip(b";") == b"" else b";"
                    continue
            if state is None:
                run = _RUN.match(buf, self.pos)
                if run.end() > self.pos:
                    self._advance(run.end())
                    continue
                m = _OUTSIDE.search(buf, self.pos)
                if m is None:
                    # The last byte may be half of `--`, `/*` or `*/`.
                    self._advance(max(self.pos, len(buf) - 1) if not self.eof else len(buf))
                    if not self.eof:
                        self._more()
                    continue
                token = m.group(0)
                ahead = {b"/*": 12, b";": len(self.delimiter)}.get(token, 1)
                if self._need(m.end() + ahead):
                    self._advance(m.start())
                    self._more()
                    continue
                self._advance(m.start())
                if token == b";" and not buf.startswith(self.delimiter, m.start()):
                    self._advance(m.end())  # a `;` inside a trigger's body
                elif token == b";":
                    self._advance(m.start() + len(self.delimiter))
                    if (statement := self._end()) is not None:
                        yield statement
                elif token in (b"'", b'"', b"`"):
                    self._advance(m.end())
                    state = token[0]
                elif token == b"#" or (token == b"--" and buf[m.end() : m.end() + 1].isspace()):
                    state = b"--"
                elif token == b"/*":
                    version = _VERSION.match(buf, m.end())
                    if version and int(version.group(1) or 0) < NEVER_RUN_VERSION:
                        self._advance(version.end(), keep=False)
                        self.conditional = True
                    else:
                        self._advance(m.end(), keep=False)
                        state = b"/*"
                elif token == b"*/" and self.conditional:
                    self._advance(m.end(), keep=False)
                    self.conditional = False
                else:  # a `-` of `1--1`, or `*/` outside any comment: text
                    self._advance(m.start() + 1)
            elif state == b"--":
                end = buf.find(b"\n", self.pos)
                self._advance(len(buf) if end < 0 else end, keep=False)
                if end >= 0:
                    state = None
            elif state == b"/*":
                end = buf.find(b"*/", self.pos)
                if end < 0:
                    self._advance(max(self.pos, len(buf) - 1), keep=False)
                    if not self._more():
                        self._advance(len(self.buf), keep=False)
                else:
                    self._advance(end + 2, keep=False)
                    state = None
            else:
                m = _STRING_END[state].search(buf, self.pos)
                if m is None:
                    self._advance(len(buf))
                elif self._need(m.end() + 1):  # an escaped byte, or a second quote, to come
                    self._advance(m.start())
                    self._more()
                elif buf[m.start()] == ord("\\"):
                    self._advance(min(m.end() + 1, len(buf)))
                elif buf[m.end() : m.end() + 1] == bytes([state]):  # '' is a quote inside
                    self._advance(m.end() + 1)
                else:
                    self._advance(m.end())
                    state = None


@dataclass
class _Table:
    columns: list[str] = field(default_factory=list)
    binary: set[str] = field(default_factory=set)  # BLOB/BINARY columns: their values are bytes
    unreadable: bool = False  # said once, at its CREATE TABLE


def read_tables(
    fh: BinaryIO,
    tables: Iterable[str],
    *,
    max_statement: int = DEFAULT_MAX_STATEMENT,
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

    wanted = set(tables)
    defined: dict[str, _Table] = {}
    rows: dict[str, list[dict[str, Value]]] = {t: [] for t in wanted}
    charset: str | None = None  # Python's name for the dump's SET NAMES; None: not declared

    def limit_for(head: bytes) -> int:
        if _SET_NAMES.match(head):
            return HEAD_BYTES
        if (m := _CREATE.match(head)) and _name(m.group(1)) in wanted:
            return min(MAX_CREATE_BYTES, max_statement)
        if (m := _INSERT.match(head)) and _name(m.group(1)) in wanted:
            table = defined.get(_name(m.group(1)))
            return 0 if table is not None and table.unreadable else max_statement
        return 0

    for statement in _Statements(fh, limit_for):
        text = statement.text
        label = f"line {statement.line}"
        if names := _SET_NAMES.match(text):
            declared = names.group(1).decode("ascii").lower()
            charset = _CHARSETS.get(declared, "utf-8")
            if declared not in _CHARSETS:
                skipped(f"{label}: SET NAMES {declared}: strings are read as UTF-8")
        elif create := _CREATE.match(text):
            name = _name(create.group(1))
            defined[name] = _definition(text, create.end(), max_columns)
            if defined[name].unreadable:
                defined[name].columns = []
                skipped(f"table {name}: more than {max_columns} columns, its rows are not read")
            elif statement.over:
                defined[name].unreadable = True
                skipped(f"table {name}: its CREATE TABLE is over {MAX_CREATE_BYTES} bytes, "
                        "its rows are not read")  # fmt: skip
        elif insert := _INSERT.match(text):
            table = _name(insert.group(1))
            if statement.over:
                skipped(f"{label}: a statement over {max_statement} bytes skipped")
                continue
            try:
                _insert(text, insert.end(), statement.line, table, defined.get(table) or _Table(),
                        charset, rows[table], max_rows, max_columns, max_row_bytes, skipped)  # fmt: skip
            except _Unreadable as exc:
                skipped(f"{exc}: the rest of this statement is skipped")
    return rows


def _definition(text: bytearray, i: int, max_columns: int) -> _Table:
    """The columns of a CREATE TABLE from just after its `(`: each definition at depth 1 that
    starts with a name (not PRIMARY KEY, KEY, CONSTRAINT ...), and whether its type is binary.
    More than `max_columns` makes the table unreadable; the rest is not looked at."""
    table = _Table()
    depth, first, second = 1, None, None
    n = len(text)
    while i < n and depth > 0:
        m = _DEFINITION_TOKEN.match(text, i)
        if m is None or m.end() == i:
            break
        i = m.end()
        punct = m.group(2)
        if punct == b"(":
            depth += 1
        elif punct in (b")", b","):
            if depth == 1 and first is not None:
                if first[:1] in (b"`", b'"') or first.lower() not in _NOT_COLUMNS:
                    if len(table.columns) >= max_columns:
                        table.columns.append("")  # one past the bound says it was passed
                        table.unreadable = True
                        return table
                    table.columns.append(_name(first))
                    if (second or b"").lower() in _BINARY_TYPES:
                        table.binary.add(table.columns[-1])
                first = second = None
            depth += -1 if punct == b")" else 0
        elif depth == 1:
            word = m.group(1) or m.group(3) or m.group(0).strip()
            if first is None:
                first = word
            elif second is None:
                second = word
    return table


def _insert(
    text: bytearray,
    i: int,
    line: int,
    table_name: str,
    table: _Table,
    charset: str | None,
    out: list[dict[str, Value]],
    max_rows: int,
    max_columns: int,
    max_row_bytes: int,
    skipped: Callable[[str], None],
) -> None:
    label = f"line {line}"
    i = _SPACE.match(text, i).end()
    names: list[str] = []
    if text[i : i + 1] == b"(":  # --complete-insert: the statement names its columns
        i += 1
        while True:
            m = _NAME.match(text, i)
            if m is None:
                raise _Unreadable(f"{label}: a column list that is not a list of names")
            names.append(_name(m.group(1)))
            if len(names) > max_columns:
                skipped(f"{label}: a column list of more than {max_columns} names: "
                        "statement skipped")  # fmt: skip
                return
            i = m.end()
            if text[i : i + 1] == b",":
                i += 1
                continue
            if text[i : i + 1] == b")":
                i = _SPACE.match(text, i + 1).end()
                break
            raise _Unreadable(f"{label}: a column list that is not a list of names")
    values = _VALUES.match(text, i)
    if values is None:
        skipped(f"{label}: INSERT into {table_name} without VALUES: statement skipped")
        return
    i = values.end()
    if not names:
        names = table.columns
    if not names:
        skipped(f"{label}: INSERT into {table_name} before its CREATE TABLE and without a "
                "column list (a dump made with --no-create-info needs --complete-insert): "
                "statement skipped")  # fmt: skip
        return
    binary = [n in table.binary for n in names]
    for number, row in enumerate(_tuples(text, i, line, binary, charset, max_row_bytes), 1):
        if row.problem:
            skipped(f"line {row.line}: row {number} skipped: {row.problem}")
            continue
        out.append(dict(zip(names, row.values, strict=True)))
        if len(out) > max_rows:
            raise DumpError(f"table {table_name}: more than {max_rows} rows")


def _tuples(
    text: bytearray, i: int, line: int, binary: list[bool], charset: str | None,
    max_row_bytes: int,
) -> Iterator[_Row]:  # fmt: skip
    """The value tuples of `(...),(...);` from `i`, each holding at most as many values as
    there are columns (`binary`: which are BLOB/BINARY): the values of a row over that or over
    `max_row_bytes` of text are scanned but not kept. Any whitespace and newlines may come
    between values and rows."""
    width = len(binary)
    n = len(text)
    counted = 0  # newlines are counted from here on: each row's line without a rescan

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count(b"\n", counted, pos)
        counted = pos
        return line

    while True:
        i = _SPACE.match(text, i).end()
        row_line = line_at(i)
        if i >= n or text[i] != ord("("):
            raise _Unreadable(f"line {row_line}: expected '(' at {_shown(text, i)}")
        start = i
        i += 1
        values: list[Value] = []
        count = 0
        problem = ""
        while True:
            i = _SPACE.match(text, i).end()
            column_binary = binary[count] if count < width else False
            value, i = _value(text, i, line_at, column_binary, charset)
            count += 1
            if isinstance(value, _Bad) and not problem:
                problem = value.why
            if count <= width and i - start <= max_row_bytes:
                values.append(value)
            i = _SPACE.match(text, i).end()
            if text[i : i + 1] == b",":
                i += 1
                continue
            if text[i : i + 1] == b")":
                i += 1
                break
            raise _Unreadable(f"line {line_at(i)}: expected ',' or ')' at {_shown(text, i)}")
        # A bad value, when there is one, says best why the row is skipped.
        if not problem and count != width:
            problem = f"{count} values for {width} columns"
        elif not problem and i - start > max_row_bytes:
            problem = f"{i - start} bytes of dump text (at most {max_row_bytes})"
        yield _Row(row_line, [] if problem else values, problem)
        i = _SPACE.match(text, i).end()
        if text[i : i + 1] == b",":
            i += 1
            continue
        if text[i : i + 1] == b";":
            return
        raise _Unreadable(f"line {line_at(i)}: expected ',' or ';' at {_shown(text, i)}")


def _shown(text: bytearray, i: int) -> str:
    return repr(bytes(text[i : i + 20]).decode("utf-8", "replace")) if i < len(text) else "the end"


def _value(
    text: bytearray, i: int, line_at: Callable[[int], int], binary: bool, charset: str | None
) -> tuple[Value | _Bad, int]:
    m = _LITERAL.match(text, i)
    if m is None:
        raise _Unreadable(f"line {line_at(i)}: unexpected {_shown(text, i)}")
    if m.group("null"):
        return None, m.end()
    if number := m.group("num"):
        if len(number) > MAX_NUMBER_CHARS:
            return _Bad(f"a number of {len(number)} characters"), m.end()
        if any(c in number for c in b".eE"):
            return float(number), m.end()
        return int(number), m.end()
    introducer = (m.group("cs") or b"").decode("ascii").lower()
    if hexa := m.group("hex"):
        digits = hexa[2:] if hexa[:2] in (b"0x", b"0X") else hexa[2:-1]
        raw: bytes = bytes.fromhex(("0" if len(digits) % 2 else "") + digits.decode("ascii"))
        end = m.end()
    elif bits := m.group("bits"):
        digits = bits[2:] if bits[:2] == b"0b" else bits[2:-1]
        return (int(digits, 2) if digits else 0), m.end()
    else:
        raw, end = _string(text, m.end(), line_at)
        if not introducer and not binary:
            return _decoded(raw, charset), end
    if introducer == "binary" or (not introducer and (binary or m.group("hex"))):
        return raw, end
    return _decoded(raw, _CHARSETS.get(introducer, charset)), end


def _decoded(raw: bytes, charset: str | None) -> str:
    if charset is not None:
        return raw.decode(charset, "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # no SET NAMES (--compatible=ansi): MySQL's latin1
        return raw.decode("cp1252", "replace")


def _string(text: bytearray, i: int, line_at: Callable[[int], int]) -> tuple[bytes, int]:
    """The bytes of a '...' literal whose body starts at `i`, and where it ends."""
    out: list[bytes] = []
    n = len(text)
    while True:
        m = _IN_STRING.search(text, i)
        if m is None or (text[m.start()] == ord("\\") and m.start() + 1 >= n):
            raise _Unreadable(f"line {line_at(n)}: a string is not closed")
        j = m.start()
        out.append(bytes(text[i:j]))
        if text[j] == ord("\\"):
            escaped = text[j + 1]
            out.append(_ESCAPES.get(escaped, bytes([escaped])))
            i = j + 2
        elif text[j + 1 : j + 2] == b"'":  # '' is a quote inside the string
            out.append(b"'")
            i = j + 2
        else:
            return b"".join(out), j + 1
