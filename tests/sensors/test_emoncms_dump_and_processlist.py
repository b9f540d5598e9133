"""The pieces of import_emoncms that need no database: the mysqldump reader, the process list
mapping, the PHPTimeSeries reader and interval choice."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

from feeds.processes.run import validate_steps
from feeds.store import phptimeseries
from sensors.emoncms_import import mysqldump
from sensors.emoncms_import import processlist as pl
from tests.sensors import emoncms_mariadb as mariadb
from tests.sensors import make_emoncms_backup as backup

CREATE = b"CREATE TABLE `input` (\n  `id` int(11) NOT NULL,\n  `name` text,\n  `v` float\n);\n"


def tables(text: bytes, **bounds) -> dict:
    return mysqldump.read_tables(io.BytesIO(text), ["input"], **bounds)


def test_it_reads_mysql_literals_as_mysqldump_writes_them():
    line = (
        b"INSERT INTO `input` VALUES (1,'it\\'s a \\\"name\\\"\\n\\\\x',-1.5e3),"
        b"(2,'o''clock',NULL),(3,'caf\xc3\xa9, (1,2);',.5),(4,_binary 'b',0x4142);\n"
    )
    assert tables(CREATE + line)["input"] == [
        {"id": 1, "name": 'it\'s a "name"\n\\x', "v": -1500.0},
        {"id": 2, "name": "o'clock", "v": None},
        {"id": 3, "name": "café, (1,2);", "v": 0.5},
        {"id": 4, "name": b"b", "v": b"AB"},  # binary literals stay bytes
    ]


def test_a_column_list_names_the_values_and_other_tables_are_skipped():
    text = (
        b"INSERT INTO `feed_1` VALUES " + b"(1,2)," * 100_000 + b"(1,2);\n"
        b"INSERT INTO `input` (`v`, `id`) VALUES (7.5,3);\n"
    )
    assert tables(text, max_statement=1000)["input"] == [{"v": 7.5, "id": 3}]


def test_the_committed_real_dump_holds_the_fixtures_rows():
    """tests/sensors/emoncms.sql is MariaDB's mysqldump of INPUTS and FEEDS (the other tests'
    site): what it holds is what they expect."""
    with open(backup.DUMP, "rb") as fh:
        rows = mysqldump.read_tables(fh, ["input", "feeds"])
    assert [tuple(r[c] for c in mariadb.INPUT_COLUMNS) for r in rows["input"]] == backup.INPUTS
    assert [tuple(r[c] for c in mariadb.FEED_COLUMNS) for r in rows["feeds"]] == backup.FEEDS


def test_mysql_forms_and_hand_edits_read_too():
    """What MariaDB's tool here does not write but MySQL's, or a person, does: MySQL 8's
    `_binary '...'`, a whole extended insert on one line, REPLACE and INSERT IGNORE, X'..',
    b'..', N'..' and introduced hex, comments inside a statement, a string over two lines."""
    create = (
        b"CREATE TABLE `input` (\n  `id` int(11) NOT NULL,\n  `name` text,\n"
        b"  `v` varbinary(8),\n  PRIMARY KEY (`id`)\n);\n"
    )
    text = create + (
        b"INSERT  IGNORE INTO `input` VALUES (1,'a',_binary '\\0\\'x'),(2,N'b',X'4142');\n"
        b"REPLACE INTO input (id, name, v) VALUES # a comment\n"
        b"  (3, _utf8mb4 0x636166C3A9, b'0100'), /* another; */ (4,'two\nlines; \\%\\_',NULL)\n;"
    )
    assert tables(text)["input"] == [
        {"id": 1, "name": "a", "v": b"\0'x"},
        {"id": 2, "name": "b", "v": b"AB"},
        {"id": 3, "name": "café", "v": 4},
        {"id": 4, "name": "two\nlines; \\%\\_", "v": None},
    ]


def test_strings_are_read_in_the_dumps_character_set():
    latin1 = (
        CREATE + b"/*!40101 SET NAMES latin1 */;\nINSERT INTO `input` VALUES (1,'caf\xe9',1);\n"
    )
    assert tables(latin1)["input"][0]["name"] == "café"
    # No SET NAMES (--compatible=ansi): UTF-8 when it is, else latin1.
    undeclared = CREATE + b"INSERT INTO `input` VALUES (1,'caf\xc3\xa9',1),(2,'caf\xe9',2);\n"
    assert [r["name"] for r in tables(undeclared)["input"]] == ["café", "café"]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64])
def test_a_token_cut_by_a_chunk_boundary_reads_the_same(monkeypatch, chunk):
    """Every `\\'`, `''`, `--`, `/*!40101` and `;` of the real dump falls on a boundary at
    one of these chunk sizes."""
    wanted = ["input", "feeds", "dashboard"]
    with open(backup.DUMP, "rb") as fh:
        whole = mysqldump.read_tables(fh, wanted)
    monkeypatch.setattr(mysqldump, "CHUNK", chunk)
    with open(backup.DUMP, "rb") as fh:
        assert mysqldump.read_tables(fh, wanted) == whole
    assert len(whole["input"]) == 5 and "INSERT INTO `input`" in whole["dashboard"][0]["content"]


def test_a_dump_cut_anywhere_is_report_lines_never_a_traceback():
    dump = backup.DUMP.read_bytes()
    for cut in range(0, len(dump), 211):
        problems: list[str] = []
        rows = mysqldump.read_tables(io.BytesIO(dump[:cut]), ["input", "feeds"], problems=problems)
        assert len(rows["input"]) <= 5 and all(p.startswith(("line", "table")) for p in problems)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (CREATE + b"INSERT INTO `input` VALUES (1,'open,2);\n", "a string is not closed"),
        (CREATE + b"INSERT INTO `input` VALUES (1,2);\n", "2 values for 3 columns"),
        (CREATE + b"INSERT INTO `input` VALUES (1,now(),3);\n", "unexpected 'now(),3);"),
        (CREATE + b"INSERT INTO `input` VALUES (1,'a',3)\n", "expected ',' or ';'"),
        (b"INSERT INTO `input` VALUES (1,'a',3);\n", "before its CREATE"),
        (CREATE + b"INSERT INTO `input` VALUES " + b"(1,'a',3)," * 200 + b"(1,'a',3);\n",
         "a statement over 1000 bytes"),
    ],
)  # fmt: skip
def test_what_mysqldump_does_not_write_is_an_error_naming_the_line(text, words):
    with pytest.raises(mysqldump.DumpError, match="line") as err:
        tables(text, max_statement=1000)
    assert words in str(err.value)


def test_rows_are_bounded():
    text = CREATE + b"INSERT INTO `input` VALUES " + b"(1,'a',3)," * 10 + b"(1,'a',3);\n"
    with pytest.raises(mysqldump.DumpError, match="more than 10 rows"):
        tables(text, max_rows=10)
    assert len(tables(text, max_rows=11)["input"]) == 11


def test_process_lists_decode_ids_and_names():
    assert pl.decode("1:5,process__scale:0.5,,71:2:6") == [
        pl.EmonStep("1", ("5",)),
        pl.EmonStep("process__scale", ("0.5",)),
        pl.EmonStep("71", ("2", "6")),
    ]


def test_process_lists_map_feeds_values_and_report_what_they_cannot():
    feeds = {5: 50, 6: 60}
    mapped = pl.to_steps("1:5,process__scale:0.5,3:-2,24:,4:6", feeds, {}, validate_steps)
    assert mapped.steps == [
        {"process": "log_to_feed", "feed": 50},
        {"process": "scale", "arg": 0.5},
        {"process": "offset", "arg": -2.0},
        {"process": "allowpositive"},
        {"process": "power_to_kwh", "feed": 60},
    ]
    assert mapped.problems == []
    cut = pl.to_steps("2:x,1:5", feeds, {}, validate_steps)
    assert cut.steps == []
    assert cut.problems == [
        "step 1 2:x (scale: argument 'x' is not a number)",
        "step 2 1:5 (left out: it follows an unmapped step)",
    ]
    assert pl.to_steps("1:7", feeds, {}, validate_steps).problems == [
        "step 1 1:7 (log_to_feed: feed 7 was not imported)"
    ]
    assert "needs 1 argument" in pl.to_steps("1", feeds, {}, validate_steps).problems[0]


def test_a_process_this_site_cannot_run_is_reported_by_its_emoncms_name():
    def runs_nothing(steps):
        return [f"step 0: unknown process {steps[0]['process']!r}"]

    mapped = pl.to_steps("13:1", {}, {}, runs_nothing)
    assert mapped.problems == ["step 1 13:1 (not supported here: unknown process 'phaseshift')"]


def test_phptimeseries_records_are_nine_bytes_and_the_interval_follows_the_spacing(tmp_path):
    path = tmp_path / "feed_1.MYD"
    raw = phptimeseries.pack([(1000, 1.5), (1060, 2.5)])
    assert raw[:9] == bytes([249]) + (1000).to_bytes(4, "little") + np.float32(1.5).tobytes()
    path.write_bytes(raw)
    assert phptimeseries.read(path)["value"].tolist() == [1.5, 2.5]
    assert phptimeseries.pick_interval(np.array([0, 86400, 172800])) == 86400
    assert phptimeseries.pick_interval(np.array([0, 9, 21, 30])) == 10
    # too long for the slot bound at 10 s: coarsened, never refused while a day fits
    assert phptimeseries.pick_interval(np.array([0, 10, 20, 10_000]), max_slots=100) == 120
    path.write_bytes(raw + b"\0")
    with pytest.raises(phptimeseries.PHPTimeSeriesError, match="not a multiple of 9"):
        phptimeseries.read(path)
    path.write_bytes(raw)
    with pytest.raises(phptimeseries.PHPTimeSeriesError, match="over 9"):
        phptimeseries.read(path, max_bytes=9)


def test_a_mangled_dump_is_report_lines_and_reads_the_same_in_any_chunks(monkeypatch):
    """The real dump with quotes, backslashes, `;`, comment marks and literal characters put
    in, taken out and changed at random (a fixed seed): never a traceback, and the same rows
    and report lines whatever the chunk size."""
    dump = backup.DUMP.read_bytes()
    start = dump.index(b"CREATE TABLE `feeds`")
    rng = random.Random(26)
    alphabet = b"'\"`\\;(),-/*!#\n 0x_bNULL9eE.+"
    for _ in range(200):
        mangled = bytearray(dump)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(start, len(mangled))
            if (op := rng.random()) < 0.4:
                mangled[i] = rng.choice(alphabet)
            elif op < 0.7:
                del mangled[i]
            else:
                mangled[i:i] = bytes([rng.choice(alphabet)]) * rng.randint(1, 3)
        seen = []
        for chunk in (mysqldump.CHUNK, 7):
            monkeypatch.setattr(mysqldump, "CHUNK", chunk)
            problems: list[str] = []
            rows = mysqldump.read_tables(
                io.BytesIO(bytes(mangled)), ["input", "feeds"], problems=problems
            )
            seen.append((rows, problems))
        assert seen[0] == seen[1]
