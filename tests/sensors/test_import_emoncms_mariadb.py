"""import_emoncms reads what the real mysqldump writes, in every mode an emoncms backup can be
made with (issue #26: MariaDB's one-row-per-line inserts stopped the import at line 50).

An emoncms database with awkward rows (quotes, backslashes, a newline, `;`, `--` and `/*` in
text, letters of any script, an emoji, NULLs, process lists) is made in the real MariaDB at
127.0.0.1:3306 and dumped by its own `mysqldump` (and `mariadb-dump`) with each option that
changes what the dump looks like; each dump must read back as the rows stored, and, packed as
emoncms's backup module packs it, import with every PHPFina file byte-identical. Without a
reachable MariaDB these tests are skipped, saying why."""

from __future__ import annotations

import io
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError

from feeds.models import Feed
from feeds.store import phpfina
from sensors.emoncms_import import mysqldump
from sensors.models import EmoncmsOrigin, Sensor, Site
from tests.sensors import emoncms_mariadb as mariadb
from tests.sensors import make_emoncms_backup as backup
from tests.sensors.test_import_emoncms_site import run

UNREACHABLE = mariadb.unreachable()
pytestmark = pytest.mark.skipif(UNREACHABLE is not None, reason=f"needs MariaDB: {UNREACHABLE}")

NOW = int(time.time())
AWKWARD = "line one\nline two; -- not /* a comment */ 'x' \\ \"y\" \t\b\x1a end"
# id, userid, nodeid, name, description, processList, time, value (mariadb.INPUT_COLUMNS)
INPUTS = [
    *backup.INPUTS,
    (6, 1, "emontx1", "power3", AWKWARD, "1:6", None, None),
    (7, 1, "température", "salle à manger", "Zürich ☃ 🔥 ''", "process__log_to_feed:6,2:-1.5",
     1_700_000_000, -1.25),
]  # fmt: skip
# mariadb.FEED_COLUMNS
FEEDS = [
    *backup.FEEDS,
    (6, "Zürich ☃ 'q' \\ \"dq\"", 1, "température", 1_700_000_000, -0.5, 1, 1, None, 5, 0, None,
     "°C"),
]  # fmt: skip
# Binary columns, which --hex-blob and MySQL's _binary change: every byte value, and the bytes
# a string escape stands for.
BINARY = [(1, bytes(range(256)) + b"'\\\n\r\x1a\0;--/*", b"\x00\x01"), (2, None, b"")]
BINARY_SQL = (
    "CREATE TABLE `bin_probe` (`id` int(11) NOT NULL PRIMARY KEY, `data` blob, "
    "`code` varbinary(16));\n"
    + "".join(
        f"INSERT INTO `bin_probe` VALUES ({i}, {mariadb.literal(d)}, {mariadb.literal(c)});\n"
        for i, d, c in BINARY
    )
    # mysqldump writes a trigger between `DELIMITER ;;` and `DELIMITER ;`: the INSERT in its
    # body is not a row of `input` (it fires on UPDATE, which nothing here does).
    + "DELIMITER ;;\nCREATE TRIGGER `dashboard_alias` BEFORE UPDATE ON `dashboard` FOR EACH ROW "
    "BEGIN SET NEW.alias = 'x'; INSERT INTO `input` (`id`, `name`) VALUES (999, 'trigger'); "
    "END;;\nDELIMITER ;\n"
)

MODES = {
    "default": [],  # what emoncms's backup module runs: extended inserts, a row a line
    "skip-extended-insert": ["--skip-extended-insert"],
    "complete-insert": ["--complete-insert"],
    "hex-blob": ["--hex-blob"],
    "compact": ["--compact"],
    "skip-comments": ["--skip-comments"],
    "no-create-info with complete-insert": ["--no-create-info", "--complete-insert"],
    # MariaDB's sandbox comment, which has no `;`, then straight the first INSERT
    "compact no-create-info": ["--compact", "--no-create-info", "--complete-insert"],
    "compatible=ansi": ["--compatible=ansi"],
    "skip-quote-names": ["--skip-quote-names"],
    "insert-ignore": ["--insert-ignore"],
    "replace": ["--replace"],
    "skip-opt": ["--skip-opt"],
    "skip-set-charset": ["--skip-set-charset"],
    "small net-buffer-length": ["--net-buffer-length=4096"],  # many INSERTs a table
    "all at once": ["--compact", "--skip-extended-insert", "--complete-insert", "--hex-blob",
                    "--skip-quote-names", "--insert-ignore"],
}  # fmt: skip
CASES = [pytest.param("mysqldump", options, id=name) for name, options in MODES.items()] + [
    pytest.param(tool, [], id=f"{tool} default")
    for tool in mariadb.dump_tools()
    if tool != "mysqldump"
]


@pytest.fixture(scope="module")
def database():
    with mariadb.scratch_database(INPUTS, FEEDS, extra_sql=BINARY_SQL) as name:
        yield name


def dumped(database: str, tool: str, options: list[str]) -> bytes:
    try:
        return mariadb.dump(database, options, tool)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"{tool} {' '.join(options)} is refused here: {exc.stderr[:200]!r}")


def as_stored(value: object, options: list[str]) -> object:
    """A text value as the dump holds it: --compatible=ansi dumps in latin1, where mysqldump
    itself writes `?` for what latin1 cannot hold (☃, 🔥)."""
    if isinstance(value, str) and "--compatible=ansi" in options:
        return value.encode("cp1252", "replace").decode("cp1252")
    return value


def expected(rows: list[tuple], options: list[str]) -> list[tuple]:
    return [tuple(as_stored(v, options) for v in row) for row in rows]


@pytest.mark.parametrize(("tool", "options"), CASES)
def test_the_rows_read_are_the_rows_stored(database, tool, options):
    problems: list[str] = []
    rows = mysqldump.read_tables(
        io.BytesIO(dumped(database, tool, options)),
        ["input", "feeds", "bin_probe"],
        problems=problems,
    )
    assert problems == []
    got_inputs = [tuple(r[c] for c in mariadb.INPUT_COLUMNS) for r in rows["input"]]
    assert got_inputs == expected(INPUTS, options)
    got_feeds = [tuple(r[c] for c in mariadb.FEED_COLUMNS) for r in rows["feeds"]]
    assert got_feeds == expected(FEEDS, options)
    assert all(r["options"] is None for r in rows["feeds"])
    if "--no-create-info" not in options:
        # Without its CREATE TABLE a BLOB that MariaDB writes as a string cannot be told from
        # text (emoncms's input and feeds tables have no binary column).
        assert [(r["id"], r["data"], r["code"]) for r in rows["bin_probe"]] == BINARY


def test_the_tool_is_mariadbs():
    """The version the docs name (docs/MOVING_FROM_EMONCMS.md) is the one these tests ran."""
    assert "MariaDB" in mariadb.tool_version()


def test_a_dump_that_names_no_columns_is_a_report_line_not_a_guess(database):
    """--no-create-info without --complete-insert: nothing in the dump says which value is
    which column, and emoncms's column order differs between sites."""
    problems: list[str] = []
    rows = mysqldump.read_tables(
        io.BytesIO(dumped(database, "mysqldump", ["--no-create-info"])),
        ["input", "feeds"],
        problems=problems,
    )
    assert rows == {"input": [], "feeds": []}
    assert len(problems) == 2
    assert all("--no-create-info needs --complete-insert" in line for line in problems)


# --- the whole import ---------------------------------------------------------------------------


def archive_of(sql: bytes, folder: Path, archive: Path) -> Path:
    """The backup module's archive around a real dump: our feed writer's PHPFina files (their
    format is not what is tested here), feed 6 beside the fixture's 1 and 2."""
    backup.write_site(folder, NOW, sql)
    end = backup.series_end(NOW)
    data = np.linspace(-5, 25, 200).astype("<f4")
    data[7] = np.nan
    (folder / "phpfina" / "6.meta").write_bytes(phpfina.pack_meta(30, end - 199 * 30))
    (folder / "phpfina" / "6.dat").write_bytes(data.tobytes())
    return backup.make_archive(folder, archive)


@pytest.mark.django_db
@pytest.mark.parametrize(("tool", "options"), CASES)
def test_each_dump_imports_with_byte_identical_feed_files(
    database, tool, options, tmp_path, feed_dir, redis_client
):
    Site.objects.create(name="Home", slug="home")
    folder = tmp_path / "emoncms"
    archive = archive_of(dumped(database, tool, options), folder, tmp_path / "backup.tar.gz")
    out = run(archive)
    assert "read 7 inputs and 6 feeds" in out, out
    assert "feeds: 4 imported" in out and "inputs: 7 created" in out, out
    ours = {o.emoncms_id: o.feed_id for o in EmoncmsOrigin.objects.filter(kind="feed")}
    for emoncms_id in (1, 2, 6):
        for ext in ("meta", "dat"):
            assert (feed_dir / f"{ours[emoncms_id]}.{ext}").read_bytes() == (
                folder / "phpfina" / f"{emoncms_id}.{ext}"
            ).read_bytes(), (emoncms_id, ext)
    zurich = Feed.objects.get(pk=ours[6])
    assert (zurich.name, zurich.tag, zurich.unit, zurich.public) == (
        as_stored("Zürich ☃ 'q' \\ \"dq\"", options), "température", "°C", True
    )  # fmt: skip
    dining = Sensor.objects.get(node__name="température", key="salle à manger")
    assert dining.name == as_stored("Zürich ☃ 🔥 ''", options)
    assert dining.processes == [
        {"process": "log_to_feed", "feed": zurich.pk},
        {"process": "scale", "arg": -1.5},
    ]
    assert Sensor.objects.get(node__name="emontx1", key="power3").name == " ".join(AWKWARD.split())


@pytest.mark.django_db
def test_an_xml_dump_is_refused_with_the_reason(database, tmp_path, feed_dir):
    """--xml is not SQL: read as SQL, the trigger's INSERT in its text would become a row."""
    Site.objects.create(name="Home", slug="home")
    sql = dumped(database, "mysqldump", ["--xml"])
    with pytest.raises(CommandError, match=r"an XML dump \(mysqldump --xml\)"):
        run(archive_of(sql, tmp_path / "emoncms", tmp_path / "backup.tar.gz"))
    assert not Sensor.objects.exists()


@pytest.mark.django_db
def test_node_10_merging_into_the_sites_radio_id_10_is_reported_as_a_merge(
    database, tmp_path, feed_dir, redis_client
):
    """The dump's node `10` is radio id 10; the site already has `emontx` on radio id 10 (emonhub
    posted here first). Its inputs go into `emontx` and the report says so plainly, naming it,
    instead of a "not brought over" line beside "nodes: N created" that read as a new node."""
    from sensors.models import Node

    home = Site.objects.create(name="Home", slug="home")
    Node.objects.create(name="emontx", node_id=10, site=home, key_prefix="x", key_hash="y")
    archive = archive_of(
        dumped(database, "mysqldump", []), tmp_path / "emoncms", tmp_path / "b.tgz"
    )
    out = run(archive)
    assert (
        "  merged into an existing node: node 10 -> the existing node 'emontx' (radio id 10): its "
        "inputs are imported into 'emontx', no node '10' was made"
    ) in out, out
    assert "nodes: 3 created, 1 merged into existing nodes;" in out, out
    assert "not brought over: node 10" not in out, out
    assert not Node.objects.filter(site=home, name="10").exists()
    assert Sensor.objects.get(node__name="emontx", key="1").node.node_id == 10
    again = run(archive)  # run again: the same merge, said the same way, nothing new
    assert "nodes: 0 created, 1 merged into existing nodes;" in again, again
    assert "merged into an existing node: node 10 -> the existing node 'emontx'" in again


# emoncms nodes `emontx` and `10` (emonhub's sendnames on and off), each with a power1 logged
# to its own feed; the site already has `emontx` on radio id 10, so both merge into it.
TWO_NAMES_INPUTS = [(2, 1, "emontx", "power1", "", "1:1", None, None),
                    (4, 1, "10", "power1", "", "1:2", None, None)]  # fmt: skip
TWO_NAMES_FEEDS = [(1, "power1", 1, "emontx", 0, 0, 1, 0, 0, 5, 0, "", "W"),
                   (2, "power1", 1, "10", 0, 0, 1, 0, 0, 5, 0, "", "W")]  # fmt: skip


@pytest.mark.django_db
def test_two_emoncms_nodes_merged_into_one_say_which_took_the_input(
    tmp_path, feed_dir, redis_client
):
    """Both `power1`s land on `emontx`: the second is not "already configured here (by hand or
    by another import)" under the node's new name; the line names emoncms node 10, the node
    that took the key, the list not applied and the imported feed nothing logs to. Both runs
    count the two merges."""
    from sensors.models import Node

    home = Site.objects.create(name="Home", slug="home")
    Node.objects.create(name="emontx", node_id=10, site=home, key_prefix="x", key_hash="y")
    with mariadb.scratch_database(TWO_NAMES_INPUTS, TWO_NAMES_FEEDS) as name:
        sql = dumped(name, "mysqldump", [])
    backup.write_site(tmp_path / "emoncms", NOW, sql)
    archive = backup.make_archive(tmp_path / "emoncms", tmp_path / "b.tgz")
    out = run(archive)
    unfed = EmoncmsOrigin.objects.get(kind="feed", emoncms_id=2).feed_id
    line = (
        "input 4 10:power1: emoncms node '10' merged into 'emontx', whose input power1 this "
        "import already took from emoncms node 'emontx' (input 2); its process list was not "
        f"applied; its history feed {unfed} (emoncms feed 2) was imported but nothing logs to it"
    )
    assert line in out, out
    assert "already configured here" not in out, out
    assert "nodes: 0 created, 2 merged into existing nodes;" in out, out
    power1 = Sensor.objects.get(node__name="emontx", key="power1")
    assert power1.feed_id == EmoncmsOrigin.objects.get(kind="feed", emoncms_id=1).feed_id
    again = run(archive)
    assert line in again, again
    assert "nodes: 0 created, 2 merged into existing nodes;" in again, again
