"""import_emoncms bounds memory, not only bytes (second red-team round): a table of a million
columns, an over-long statement, over-size HTTP answers, a 5,000-digit integer, a negative
interval and deep nesting each end as a line of the report (or, for an answer the import
cannot go on without, one CommandError line), never a traceback and never memory in
proportion to what was sent. Peak memory is measured with tracemalloc where the bound is
deterministic (a bounded parse), with a generous margin."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
import urllib.parse
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
from django.core.management import CommandError

from feeds.models import Feed
from sensors.emoncms_import import mysqldump
from sensors.emoncms_import import site as emoncms_site
from sensors.models import Sensor
from tests.sensors import make_emoncms_backup as backup
from tests.sensors.test_import_emoncms_site import EmoncmsStandIn, run

pytestmark = pytest.mark.django_db

NOW = int(time.time())
DIGITS_5000 = "9" * 5000


def _archive(tmp_path: Path, edit: Callable[[str], str]) -> Path:
    """The fixture's backup with its emoncms.sql changed by `edit`."""
    folder = backup.write_site(tmp_path / "emoncms", NOW)
    sql = folder / "emoncms.sql"
    sql.write_text(edit(sql.read_text(encoding="utf-8")), encoding="utf-8")
    return backup.make_archive(folder, tmp_path / "backup.tar.gz")


def _extra_input_row(values: list[str]) -> Callable[[str], str]:
    """Adds a row at the end of the input table's INSERT (after the fixture's five)."""

    def edit(text: str) -> str:
        start = text.index("\nINSERT INTO `input` VALUES")
        end = text.index(";\n", start)
        return text[:end] + ",(" + ",".join(values) + ")" + text[end:]

    return edit


def _not_brought(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if "not brought over:" in line]


# --- the dump ---------------------------------------------------------------------------------


def test_a_row_with_too_many_columns_is_a_report_line(tmp_path, feed_dir, site, redis_client):
    archive = _archive(tmp_path, _extra_input_row(["1"] * 100_000))
    out = run(archive)
    assert "inputs: 5 created" in out  # the other rows are imported
    assert any("row 6 skipped: 100000 values for 8 columns" in line for line in _not_brought(out))


def test_a_table_of_too_many_columns_is_a_report_line(tmp_path, feed_dir, site, redis_client):
    columns = "".join(f"  `c{i}` int(11),\n" for i in range(300))
    archive = _archive(
        tmp_path,
        lambda text: text.replace("CREATE TABLE `feeds` (\n", "CREATE TABLE `feeds` (\n" + columns),
    )
    out = run(archive)
    assert "table feeds: more than 256 columns, its rows are not read" in out
    assert "feeds: 0 imported" in out and "inputs: 5 created" in out
    assert not Feed.objects.exists()


def test_a_million_columns_are_read_in_bounded_memory():
    """What took the import to 836 MB: the CREATE TABLE of a million columns, then a row of a
    million values. Reading it now holds at most 256 column names and no row."""
    columns = b"".join(b"  `c%d` int(11),\n" % i for i in range(1_000_000))
    row = b"INSERT INTO `input` VALUES (" + b"1," * 999_999 + b"1);\n"
    dump = io.BytesIO(b"CREATE TABLE `input` (\n" + columns + b");\n" + row)
    problems: list[str] = []
    tracemalloc.start()
    try:
        rows = mysqldump.read_tables(dump, ["input"], problems=problems)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows == {"input": []}
    assert problems == ["table input: more than 256 columns, its rows are not read"]
    assert peak < 8 * 1024**2, peak  # the dump itself is 21 MB; a list of its names was 60+ MB


def test_a_wide_row_is_scanned_not_kept():
    create = b"CREATE TABLE `input` (\n  `id` int(11),\n  `name` text\n);\n"
    # 100,000 values: enough that keeping them (~6.5 MB of str objects and a list) would
    # show against the bound, few enough to scan quickly under tracemalloc
    row = b"INSERT INTO `input` VALUES (" + b"'abcdefgh'," * 100_000 + b"1),(2,'kept');\n"
    dump = io.BytesIO(create + row)
    problems: list[str] = []
    tracemalloc.start()
    try:
        rows = mysqldump.read_tables(dump, ["input"], problems=problems)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows == {"input": [{"id": 2, "name": "kept"}]}
    assert problems == ["line 5: row 1 skipped: 100001 values for 2 columns"]
    # the statement (1.1 MB) and its text are held; its 100,001 values never are (~6.5 MB)
    assert peak < 3 * len(row), peak


def test_an_over_long_statement_is_a_report_line(tmp_path, feed_dir, site, redis_client):
    over = mysqldump.DEFAULT_MAX_STATEMENT // 20 + 1
    long_insert = (
        "INSERT INTO `input` VALUES "
        + "(6,1,'x','y','','',0,0)," * over
        + "(7,1,'x','z','','',0,0);\n"
    )

    def edit(text: str) -> str:
        after = text.index("UNLOCK TABLES;\n", text.index("\nINSERT INTO `input` VALUES"))
        return text[:after] + long_insert + text[after:]

    out = run(_archive(tmp_path, edit))
    assert f"a statement over {mysqldump.DEFAULT_MAX_STATEMENT} bytes skipped" in out
    assert "inputs: 5 created" in out


def test_a_5000_digit_integer_in_the_dump_is_a_report_line(tmp_path, feed_dir, site, redis_client):
    archive = _archive(
        tmp_path, _extra_input_row([DIGITS_5000, "1", "'n'", "'k'", "''", "''", "0", "0"])
    )
    out = run(archive)
    assert "row 6 skipped: a number of 5000 characters" in out
    assert "inputs: 5 created" in out


def test_an_id_past_mysql_int_is_a_report_line(tmp_path, feed_dir, site, redis_client):
    archive = _archive(
        tmp_path, _extra_input_row(["9" * 30, "1", "'n'", "'k'", "''", "''", "0", "0"])
    )
    out = run(archive)
    assert "input row without an id of 1 to 2147483647 skipped" in out
    assert "inputs: 5 created" in out


def test_a_broken_literal_skips_the_rest_of_its_statement_only(
    tmp_path, feed_dir, site, redis_client
):
    archive = _archive(tmp_path, _extra_input_row(["now()"]))
    out = run(archive)
    assert "unexpected 'now()" in out
    assert "the rest of this statement is skipped" in out
    assert "inputs: 5 created" in out  # the rows before it are kept
    assert "feeds: 3 imported" in out  # the feeds' statements are read


# --- over HTTP --------------------------------------------------------------------------------


class Hostile(EmoncmsStandIn):
    """The stand-in emoncms with some answers replaced: path -> (body, send Content-Length)."""

    answers: dict[str, tuple[bytes, bool]] = {}

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        key = f"{url.path.removeprefix('/emoncms/')}?id={query['id']}" if "id" in query else ""
        answer = self.answers.get(key) or self.answers.get(url.path.removeprefix("/emoncms/"))
        if answer is None:
            return super().do_GET()
        body, declared = answer
        self.send_response(200)
        if declared:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")  # the body ends when the socket does
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading at its bound: expected


@pytest.fixture
def hostile(tmp_path):
    """Start the stand-in with `answers`; yields a function that returns its URL."""
    files = backup.write_site(tmp_path / "emoncms", NOW)
    servers = []

    def serve(answers: dict[str, tuple[bytes, bool]]) -> str:
        handler = type("Handler", (Hostile,), {"files": files, "answers": answers})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/emoncms"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def key_file(tmp_path) -> Path:
    path = tmp_path / "apikey"
    path.write_text(EmoncmsStandIn.apikey)
    return path


def _run_url(url: str, key_file: Path, *extra: str) -> str:
    return run("--url", url, "--apikey-file", key_file, *extra)


@pytest.mark.parametrize("declared", [True, False])
def test_an_over_size_list_answer_is_refused_while_it_is_read(
    hostile, key_file, feed_dir, site, monkeypatch, declared
):
    monkeypatch.setattr(emoncms_site, "MAX_LIST_BYTES", 100_000)
    url = hostile({"input/list.json": (b"[" + b"{}," * 400_000 + b"{}]", declared)})
    with pytest.raises(CommandError, match="GET input/list.json: answer .*over 100000"):
        _run_url(url, key_file)
    assert not Sensor.objects.exists()


def test_a_list_of_too_many_tiny_objects_is_refused(hostile, key_file, feed_dir, site, monkeypatch):
    monkeypatch.setattr(emoncms_site, "MAX_JSON_ITEMS", 1000)
    url = hostile({"feed/list.json": (b"[" + b"{}," * 2000 + b"{}]", True)})
    with pytest.raises(CommandError, match="more than 1000 JSON objects, members and numbers"):
        _run_url(url, key_file)


def test_deep_nesting_is_a_line(hostile, key_file, feed_dir, site, redis_client):
    deep = b"[" * 10_000 + b"]" * 10_000  # Python's recursion limit is 1,000
    url = hostile({"feed/getmeta.json?id=1": (deep, True)})
    out = _run_url(url, key_file)
    assert "feed 1: GET feed/getmeta.json: JSON nested too deeply" in out
    assert "feeds: 2 imported" in out  # the others
    url = hostile({"input/list.json": (deep, True)})
    with pytest.raises(CommandError, match="GET input/list.json: JSON nested too deeply"):
        _run_url(url, key_file)


def test_a_5000_digit_integer_over_http_is_a_line(hostile, key_file, feed_dir, site, redis_client):
    meta = b'{"id": 1, "interval": ' + DIGITS_5000.encode() + b', "start_time": 0}'
    out = _run_url(hostile({"feed/getmeta.json?id=1": (meta, True)}), key_file)
    assert "feed 1: GET feed/getmeta.json: not JSON (Exceeds the limit" in out
    assert "feeds: 2 imported" in out
    inputs = json.dumps([{"id": 1, "nodeid": "n", "name": "k"}]).replace(
        '"id": 1', '"id": ' + "7" * 4000
    )
    out = _run_url(hostile({"input/list.json": (inputs.encode(), True)}), key_file)
    assert "input row without an id of 1 to 2147483647 skipped" in out


@pytest.mark.parametrize(
    ("meta", "words"),
    [
        ({"interval": -10, "start_time": 0}, "interval '-10': not 1 to 86400 s"),
        ({"interval": 0, "start_time": 0}, "interval '0'"),
        ({"interval": 10, "start_time": -1}, "start_time '-1'"),
        ({"interval": 2**40, "start_time": 0}, "interval '1099511627776'"),
        ([1, 2], "'[1, 2]', not an object"),
    ],
)
def test_a_bad_getmeta_is_a_line(hostile, key_file, feed_dir, site, redis_client, meta, words):
    out = _run_url(hostile({"feed/getmeta.json?id=2": (json.dumps(meta).encode(), True)}), key_file)
    assert f"feed 2: getmeta.json gave {words}" in out
    assert "feeds: 2 imported" in out
    assert not Feed.objects.filter(name="use_kwh").exists()


def test_an_over_size_feed_export_is_streamed_to_disk_and_bounded(
    hostile, key_file, feed_dir, site, redis_client
):
    """export.json answered with 64 MB: read in 1 MiB chunks to a file, so the import's peak
    memory stays a few chunks; past --max-gb the import stops with one line."""
    big = b"\0" * (64 * 1024**2)
    url = hostile({"feed/export.json?id=1": (big, False)})
    tracemalloc.start()
    try:
        with pytest.raises(CommandError, match="more than 10737418 bytes of data over HTTP"):
            _run_url(url, key_file, "--max-gb", "0.01")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024**2, peak
    assert not list(feed_dir.glob(".emoncms-import-*"))  # staging removed
