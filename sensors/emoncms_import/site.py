"""A whole emoncms site moved here: inputs, process lists, feeds (names, tags, units, data).

Two sources give the same `EmonSite` (its inputs, its feeds, a folder holding `phpfina/` and
`phptimeseries/` files):

- `from_backup`: the archive emoncms's backup module makes (emoncms/backup,
  emoncms-export.sh): a .tar.gz holding `emoncms.sql` (a plain mysqldump), `phpfina/<id>.meta`
  and `.dat`, `phptimeseries/feed_<id>.MYD`, and emonhub.conf/settings we do not need. Only
  those members are read, each to a path we build from its validated name, so no member can
  land outside the staging folder; links, devices and `..` names are refused and reported.
  The dump is parsed by sensors/emoncms_import/mysqldump.py, never executed.
- `from_http`: a running emoncms over its API with a read key: /input/list.json,
  /feed/list.json, /feed/getmeta.json and /feed/export.json (the raw file bytes).

Memory is bounded whatever the archive or the server sends (a fake emoncms answering
export.json with 1 GiB, or list.json with 16 MB twice, took the import past 1.1 GB; a crafted
2.5 MB backup to 836 MB): the dump is read a statement at a time with bounds per statement and
per row (mysqldump.py); each HTTP answer is read in chunks of COPY_CHUNK up to a bound for its
kind (MAX_LIST_BYTES, MAX_META_BYTES; feed data goes to a file, bounded by what is left of
--max-gb), a JSON answer is refused past MAX_JSON_ITEMS objects and numbers, and a number or a
nesting Python cannot take is a line, never a traceback. A bad value of one input or feed is a
line in the report and the rest is imported; only an answer the import cannot go on without
(the input or feed list) ends it, with one line saying why.

`import_site` then creates (or, on a second run, finds) one Feed per PHPFina/PHPTimeSeries
feed, one Node per emoncms node and one Sensor per input, and maps each input's process list
(sensors/emoncms_import/processlist.py). Which emoncms id became which object of ours is kept in
EmoncmsOrigin, so a second run changes nothing that is already there. Every imported feed's
last value is seeded in Redis from its file, so kWh accumulators continue from the imported
total. Whatever could not be brought over is listed in the report, one line each.
"""

from __future__ import annotations

import json
import lzma
import math
import re
import shutil
import tarfile
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction

from feeds.emoncms import files as emoncms_files
from feeds.models import Feed
from feeds.processes.run import validate_steps
from feeds.store import phpfina, phptimeseries
from sensors.emoncms_import import continuity, mysqldump
from sensors.emoncms_import import processlist as emoncms_processlist
from sensors.ingest.parse import emoncms_name, is_emoncms_name
from sensors.models import EmoncmsOrigin, Node, Sensor, Site

# Where a feed id's files live (feeds.store.service.feed_dir: the id's shard directory).
FeedDir = Callable[[int], Path]

PHPFINA, PHPTIMESERIES = 5, 2
ENGINES = {0: "MySQL", 1: "Timestore", 2: "PHPTimeSeries", 3: "Graphite", 4: "PHPTimestore",
           5: "PHPFina", 6: "PHPFiwa", 7: "virtual", 8: "MySQL memory", 9: "Redis buffer",
           10: "Cassandra"}  # fmt: skip
DEFAULT_MAX_BYTES = 20 * 1024**3  # of all members read from an archive or over HTTP
DEFAULT_MAX_MEMBERS = 200_000
MAX_SQL_BYTES = 2 * 1024**3
# HTTP answers, per kind: a list of 20,000 inputs or feeds is about 5-7 MB in emoncms's JSON
# (250-350 bytes a row); getmeta.json is one small object.
MAX_LIST_BYTES = 16 * 1024 * 1024
MAX_META_BYTES = 64 * 1024
# Objects, object members and numbers one JSON answer may hold: 20,000 feeds of 16 fields is
# 320,000 members; 16 MB of `{},` would otherwise be 5 million dicts (hundreds of MB).
MAX_JSON_ITEMS = 1_000_000
MAX_OBJECTS = 20_000  # inputs, and feeds, of one site
# emoncms's ids are MySQL INT(11) AUTO_INCREMENT: larger (or negative) is not an emoncms id.
MAX_ID = 2**31 - 1
MAX_INTERVAL_S = 86_400  # as the import of the data itself (1 s to a day)
HTTP_TIMEOUT_S = 60
COPY_CHUNK = 1 << 20

_PHPFINA_FILE = re.compile(r"^(\d{1,9})\.(meta|dat)$")
_PHPTS_FILE = re.compile(r"^feed_(\d{1,9})\.MYD$")


class SourceError(Exception):
    """The source cannot be imported at all (not an archive, over a bound, HTTP failure)."""


class BudgetSpent(SourceError):
    """More data than --max-gb allows: the import stops, whichever answer went over."""


@dataclass
class EmonInput:
    id: int
    nodeid: str
    name: str
    description: str
    process_list: str
    # emoncms's last reading of the input (its `time`, `value`): None when it never had one
    time: int | None = None
    value: float | None = None


@dataclass
class EmonFeed:
    id: int
    name: str
    tag: str
    engine: int
    unit: str
    public: bool
    process_list: str


@dataclass
class EmonSite:
    inputs: list[EmonInput]
    feeds: list[EmonFeed]
    files: Path  # holds phpfina/ and phptimeseries/
    problems: list[str] = field(default_factory=list)


@dataclass
class Report:
    feeds_imported: int = 0
    feeds_kept: int = 0
    inputs_created: int = 0
    inputs_adopted: int = 0  # posted here before the import (auto-created), given emoncms's list
    inputs_kept: int = 0
    nodes_created: int = 0
    # "node 10 -> 'emontx' (radio id 10)": an emoncms node whose inputs went into a node this
    # site already had, by radio id or by name; no new node was made for it
    nodes_merged: list[str] = field(default_factory=list)
    inputs_continued: int = 0  # given emoncms's last reading (continuity.py)
    new_nodes: list[Node] = field(default_factory=list)  # created by this run
    problems: list[str] = field(default_factory=list)
    # "feed 2 emonpi:use_kwh -> emonpi:use_kwh (second 2)": a name the tag already had
    feeds_renamed: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"feeds: {self.feeds_imported} imported, {self.feeds_kept} already here; "
            f"inputs: {self.inputs_created} created, {self.inputs_adopted} adopted, "
            f"{self.inputs_kept} already here; "
            f"nodes: {self.nodes_created} created, {len(self.nodes_merged)} merged into "
            f"existing nodes; not brought over: {len(self.problems)}; "
            f"feeds renamed: {len(self.feeds_renamed)}; inputs carrying on from emoncms's last "
            f"reading: {self.inputs_continued}"
        )


# --- reading a source ---------------------------------------------------------------------------


def _text(value: object, limit: int = 1000) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value)[:limit]


def _int(value: object) -> int | None:
    """An integer from a dump or JSON value (emoncms sends some numbers as text), or None.
    Over 4,300 digits int() refuses (ValueError too); a float such as 5.0 is not taken."""
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _id(value: object) -> int | None:
    """An emoncms id (1 to 2**31 - 1), or None: a larger one overflowed the database."""
    number = _int(value)
    return number if number is not None and 0 < number <= MAX_ID else None


def _last_reading(row: dict) -> tuple[int | None, float | None]:
    """An input's last (time, value) as emoncms holds it, or (None, None): no time (NULL, 0,
    out of uint32), or a value that is not a finite number."""
    t = _int(row.get("time"))
    try:
        value = float(str(row.get("value")).strip())
    except (TypeError, ValueError):
        return None, None
    if t is None or not 0 < t <= 0xFFFFFFFF or not math.isfinite(value):
        return None, None
    return t, value


def _site_rows(
    rows: dict, userid: int | None, problems: list[str]
) -> tuple[list[EmonInput], list[EmonFeed]]:
    raw_inputs, raw_feeds = rows.get("input", []), rows.get("feeds", [])
    users = sorted({_int(r.get("userid")) for r in raw_inputs + raw_feeds} - {None})
    if userid is None and len(users) > 1:
        raise SourceError(f"the site has several users {users}: choose one with --userid")
    if userid is not None:
        raw_inputs = [r for r in raw_inputs if _int(r.get("userid")) == userid]
        raw_feeds = [r for r in raw_feeds if _int(r.get("userid")) == userid]
    if len(raw_inputs) > MAX_OBJECTS or len(raw_feeds) > MAX_OBJECTS:
        raise SourceError(f"more than {MAX_OBJECTS} inputs or feeds")
    inputs, feeds = [], []
    for r in raw_inputs:
        if _id(r.get("id")) is None:
            problems.append(f"input row without an id of 1 to {MAX_ID} skipped: {_text(r, 80)}")
            continue
        inputs.append(EmonInput(
            _id(r["id"]), _text(r.get("nodeid"), 200), _text(r.get("name"), 200),
            _text(r.get("description"), 200), _text(r.get("processList"), 10_000),
            *_last_reading(r),
        ))  # fmt: skip
    for r in raw_feeds:
        engine = _int(r.get("engine"))
        if _id(r.get("id")) is None or engine is None or not 0 <= engine <= 255:
            problems.append(
                f"feed row without an id of 1 to {MAX_ID} or an engine number skipped: "
                f"{_text(r, 80)}"
            )
            continue
        feeds.append(EmonFeed(
            _id(r["id"]), _text(r.get("name"), 100), _text(r.get("tag"), 100),
            engine, _text(r.get("unit"), 16), bool(_int(r.get("public")) or 0),
            _text(r.get("processList"), 10_000),
        ))  # fmt: skip
    return inputs, feeds


def _member_target(name: str) -> tuple[str, str] | None:
    """("sql" | "phpfina" | "phptimeseries", file name) for the members we use, else None."""
    parts = PurePosixPath(name).parts
    if parts and parts[-1] == "emoncms.sql":
        return "sql", "emoncms.sql"
    if len(parts) >= 2 and parts[-2] == "phpfina" and _PHPFINA_FILE.match(parts[-1]):
        return "phpfina", parts[-1]
    if len(parts) >= 2 and parts[-2] == "phptimeseries" and _PHPTS_FILE.match(parts[-1]):
        return "phptimeseries", parts[-1]
    return None


def _copy_bounded(src: BinaryIO, dst: Path, limit: int) -> int:
    """Copy at most `limit` bytes; more is a SourceError (a member larger than it says)."""
    copied = 0
    with open(dst, "wb") as out:
        while chunk := src.read(COPY_CHUNK):
            copied += len(chunk)
            if copied > limit:
                raise SourceError(f"{dst.name}: more bytes than the bound of {limit}")
            out.write(chunk)
    return copied


def from_backup(
    archive: Path,
    staging: Path,
    *,
    userid: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> EmonSite:
    """Read an emoncms backup archive into `staging` (an empty folder of ours)."""
    problems: list[str] = []
    for sub in ("phpfina", "phptimeseries"):
        (staging / sub).mkdir(parents=True, exist_ok=True)
    total = members = 0
    seen_fiwa = False
    try:
        # Stream mode ("r|*"): members are read in order, never seeked, gzip or not.
        with tarfile.open(archive, "r|*") as tar:
            for member in tar:
                members += 1
                if members > max_members:
                    raise SourceError(f"more than {max_members} members in the archive")
                name = member.name
                parts = PurePosixPath(name).parts
                if name.startswith("/") or ".." in parts:
                    problems.append(
                        f"archive member {name[:100]!r} refused: path outside the archive"
                    )
                    continue
                if member.isdir():
                    continue
                if "phpfiwa" in parts and not seen_fiwa:
                    seen_fiwa = True
                    problems.append(
                        "phpfiwa/ feeds are in the archive: that engine is not imported"
                    )
                target = _member_target(name)
                if target is None:
                    continue
                if not member.isfile():
                    problems.append(f"archive member {name[:100]!r} refused: not a regular file")
                    continue
                total += member.size
                if total > max_bytes:
                    raise SourceError(f"archive holds more than {max_bytes} bytes of data")
                kind, filename = target
                dest = staging / filename if kind == "sql" else staging / kind / filename
                src = tar.extractfile(member)
                if src is None:
                    continue
                _copy_bounded(src, dest, member.size)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise SourceError(f"{archive.name} is not a readable .tar.gz backup: {exc}") from exc
    sql = staging / "emoncms.sql"
    if not sql.exists():
        raise SourceError(f"{archive.name} holds no emoncms.sql (not an emoncms backup?)")
    if sql.stat().st_size > MAX_SQL_BYTES:
        raise SourceError(f"emoncms.sql is over {MAX_SQL_BYTES} bytes")
    dump_problems: list[str] = []
    with open(sql, "rb") as fh:
        # `mysqldump --xml` writes XML, whose text would be read as SQL (a trigger's INSERT
        # as a row): refused whole, with the reason.
        if fh.read(64).lstrip().startswith(b"<"):
            raise SourceError("emoncms.sql is an XML dump (mysqldump --xml): make the backup "
                              "with emoncms's backup module, or mysqldump without --xml")  # fmt: skip
        fh.seek(0)
        try:
            rows = mysqldump.read_tables(
                fh, ["input", "feeds"], max_rows=MAX_OBJECTS, problems=dump_problems
            )
        except mysqldump.DumpError as exc:
            raise SourceError(f"emoncms.sql: {exc}") from exc
    problems += [f"emoncms.sql: {line}" for line in dump_problems]
    if not rows["input"] and not rows["feeds"]:
        # Said, so that an --xml or --tab dump, or another database's, is not a silent nothing.
        problems.append("emoncms.sql: no rows of the input or feeds tables (not an SQL dump of "
                        "emoncms's database?)")  # fmt: skip
    inputs, feeds = _site_rows(rows, userid, problems)
    return EmonSite(inputs, feeds, staging, problems)


class _TooManyItems(ValueError):
    pass


def _bounded_json(body: bytes, what: str) -> object:
    """json.loads with at most MAX_JSON_ITEMS objects, members and numbers (counted by the
    parser's hooks as it goes, so a flood of tiny objects is stopped while it is parsed), and
    every failure a SourceError: a number of more than 4,300 digits is a ValueError, nesting
    deeper than the parser's recursion limit a RecursionError."""
    count = 0

    def counted(n: int) -> None:
        nonlocal count
        count += n
        if count > MAX_JSON_ITEMS:
            raise _TooManyItems(f"more than {MAX_JSON_ITEMS} JSON objects, members and numbers")

    def pairs(items: list[tuple[str, object]]) -> dict:
        counted(1 + len(items))
        return dict(items)

    def number(cast: Callable[[str], object]) -> Callable[[str], object]:
        def parse(text: str) -> object:
            counted(1)
            return cast(text)

        return parse

    try:
        return json.loads(
            body, object_pairs_hook=pairs, parse_int=number(int), parse_float=number(float)
        )
    except _TooManyItems as exc:
        raise SourceError(f"GET {what}: {exc}") from None
    except RecursionError:
        raise SourceError(f"GET {what}: JSON nested too deeply") from None
    except ValueError as exc:  # not JSON, bad UTF-8, or an integer over Python's digit limit
        raise SourceError(f"GET {what}: not JSON ({str(exc)[:80]}; {body[:40]!r})") from None


class _Http:
    def __init__(self, url: str, apikey: str, max_bytes: int) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise SourceError(f"--url must be http(s)://host[/path], not {url[:80]!r}")
        self.base = url.rstrip("/")
        self.apikey = apikey
        self.budget = max_bytes

    def _open(self, path: str, params: dict[str, object]):
        query = urllib.parse.urlencode(params)
        request = urllib.request.Request(
            f"{self.base}/{path}" + (f"?{query}" if query else ""),
            # The key in a header, not the URL: URLs end up in the server's access log.
            headers={"Authorization": f"Bearer {self.apikey}", "User-Agent": "openbms-import"},
        )
        try:
            return urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S)
        except (OSError, ValueError) as exc:  # ValueError: a URL urllib cannot use
            raise SourceError(f"GET {path}: {exc}") from exc

    def _chunks(self, path: str, limit: int, **params: object) -> Iterator[bytes]:
        """The answer in chunks of COPY_CHUNK, at most `limit` bytes (and what is left of the
        budget): an answer that says or turns out to be longer is a SourceError, found before
        more than `limit` + one chunk is read, and never held whole."""
        over: type[SourceError] = SourceError
        if self.budget <= limit:  # the budget binds: past it the whole import must stop
            limit, over = self.budget, BudgetSpent
        with self._open(path, params) as response:
            declared = _int(response.headers.get("Content-Length"))
            if declared is not None and declared > limit:
                raise over(f"GET {path}: answer of {declared} bytes, over {limit}")
            got = 0
            while True:
                try:
                    chunk = response.read(COPY_CHUNK)
                except OSError as exc:
                    raise SourceError(f"GET {path}: {exc}") from exc
                if not chunk:
                    return
                got += len(chunk)
                if got > limit:
                    raise over(f"GET {path}: answer over {limit} bytes")
                self.budget -= len(chunk)
                yield chunk

    def get(self, path: str, limit: int, **params: object) -> bytes:
        """A small answer (at most `limit` bytes) in memory."""
        return b"".join(self._chunks(path, limit, **params))

    def download(self, path: str, dest: Path, **params: object) -> int:
        """Feed data straight to `dest`, bounded by the budget (--max-gb) only: on disk,
        never in memory. A partial file is removed."""
        written = 0
        try:
            with open(dest, "wb") as out:
                for chunk in self._chunks(path, self.budget, **params):
                    out.write(chunk)
                    written += len(chunk)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        return written

    def json(self, path: str, limit: int, **params: object) -> object:
        return _bounded_json(self.get(path, limit, **params), path)


def _meta(doc: object) -> tuple[int, int] | str:
    """(interval, start_time) from a getmeta.json answer, or why it cannot be used."""
    if not isinstance(doc, dict):
        return f"getmeta.json gave {_text(doc, 40)!r}, not an object"
    interval, start = _int(doc.get("interval")), _int(doc.get("start_time"))
    if interval is None or not 1 <= interval <= MAX_INTERVAL_S:
        return (f"getmeta.json gave interval {_text(doc.get('interval'), 40)!r}: not 1 to "
                f"{MAX_INTERVAL_S} s")  # fmt: skip
    if start is None or not 0 <= start <= 0xFFFFFFFF:
        return f"getmeta.json gave start_time {_text(doc.get('start_time'), 40)!r}"
    return interval, start


def from_http(
    url: str, apikey: str, staging: Path, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> EmonSite:
    """Read a live emoncms (its API with a read key) into `staging`.

    The two lists are needed whole (SourceError when they cannot be read); what fails for one
    feed (its meta, its data) is a line in the report and the next feed is read."""
    http = _Http(url, apikey, max_bytes)
    problems: list[str] = []
    inputs_doc = http.json("input/list.json", MAX_LIST_BYTES)
    feeds_doc = http.json("feed/list.json", MAX_LIST_BYTES)
    if not isinstance(inputs_doc, list) or not isinstance(feeds_doc, list):
        raise SourceError(
            "input/list.json and feed/list.json must be JSON lists: is the key a read key? "
            f"(got {str(inputs_doc)[:80]!r})"
        )
    rows = {"input": [r for r in inputs_doc if isinstance(r, dict)],
            "feeds": [r for r in feeds_doc if isinstance(r, dict)]}  # fmt: skip
    skipped = len(inputs_doc) + len(feeds_doc) - len(rows["input"]) - len(rows["feeds"])
    if skipped:
        problems.append(f"{skipped} list entries that are not objects skipped")
    del inputs_doc, feeds_doc
    inputs, feeds = _site_rows(rows, None, problems)
    for sub in ("phpfina", "phptimeseries"):
        (staging / sub).mkdir(parents=True, exist_ok=True)
    for feed in feeds:
        try:
            if feed.engine == PHPFINA:
                meta = _meta(http.json("feed/getmeta.json", MAX_META_BYTES, id=feed.id))
                if isinstance(meta, str):
                    problems.append(f"feed {feed.id}: {meta}")
                    continue
                dat = staging / "phpfina" / f"{feed.id}.dat"
                http.download("feed/export.json", dat, id=feed.id, start=0)
                (staging / "phpfina" / f"{feed.id}.meta").write_bytes(phpfina.pack_meta(*meta))
            elif feed.engine == PHPTIMESERIES:
                myd = staging / "phptimeseries" / f"feed_{feed.id}.MYD"
                http.download("feed/export.json", myd, id=feed.id, start=0)
        except BudgetSpent as exc:
            raise SourceError(f"more than {max_bytes} bytes of data over HTTP ({exc})") from None
        except SourceError as exc:
            problems.append(f"feed {feed.id}: {exc}")
    return EmonSite(inputs, feeds, staging, problems)


# --- bringing it in ------------------------------------------------------------------------------


def other_sites_of_source(source: str, site: Site | None) -> list[str]:
    """The sites (names) other than `site` whose inputs an import under `source` made. A
    second building's backup imported under the first's source name would find every emoncms
    id "already here" (EmoncmsOrigin is keyed by source and id, feeds and input ids are the
    same numbers in both emonPis) and bring nothing; the caller refuses it, naming them."""
    made = EmoncmsOrigin.objects.filter(
        source=source, kind=EmoncmsOrigin.Kind.INPUT, sensor__isnull=False
    )
    made = (
        made.exclude(sensor__node__site=site)
        if site is not None
        else made.exclude(sensor__node__site__isnull=True)
    )
    names = made.values_list("sensor__node__site__name", flat=True).distinct()
    return sorted(name or "(no site)" for name in names)


def import_site(
    emon: EmonSite, *, site: Site | None, source: str, feed_dir: FeedDir, buffer
) -> Report:
    report = Report(problems=list(emon.problems))
    feed_map = _import_feeds(emon, source, feed_dir, buffer, report)
    # Only inputs new to us get emoncms's process list: one imported before may have been
    # corrected by hand since, and a second run must not undo that.
    sensors, input_map, collisions = _import_inputs(emon, site, source, report)
    units = dict(Feed.objects.filter(pk__in=feed_map.values()).values_list("pk", "unit"))
    by_id = {i.id: i for i in emon.inputs}
    for emon_id, sensor in sensors.items():
        inp = by_id[emon_id]
        mapped = emoncms_processlist.to_steps(inp.process_list, feed_map, input_map, validate_steps)
        for problem in mapped.problems:
            report.problems.append(f"input {inp.id} {sensor.node.name}:{sensor.key}: {problem}")
        logged = next(
            (s["feed"] for s in mapped.steps if s["process"].startswith("log_to_feed")), None
        )
        sensor.processes = mapped.steps
        sensor.feed_id = logged
        sensor.unit = units.get(logged, sensor.unit) or sensor.unit
        sensor.save(update_fields=["processes", "feed", "unit"])
        if inp.time is not None and inp.value is not None:
            left = continuity.carry_over(
                buffer, settings.TIME_ZONE, sensor.node_id, sensor.key, mapped.steps,
                inp.time, inp.value,
            )  # fmt: skip
            report.inputs_continued += 1
            for name in left:
                report.problems.append(
                    f"input {inp.id} {sensor.node.name}:{sensor.key}: {name} starts afresh, "
                    f"not from emoncms's last reading (at {inp.time}: a step before it reads "
                    "another input or feed, or the feed is newer than the reading)"
                )
    # After the lists are applied: only then is it known whether anything logs to a feed.
    report.problems += [_collision_line(c, emon, feed_map) for c in collisions]
    _expect_readings_as_logged(report.new_nodes)
    from sensors.cache import bump_generation

    bump_generation()  # workers reload their sensor maps with the new process lists
    return report


# A node whose inputs log to no feed: how often an emonTH-class node posts (as a node a gateway
# key registers, sensors/ingest/registration.py).
INTERVAL_WITHOUT_FEEDS_S = 60
LOGGING = ("log_to_feed", "log_to_feed_join")


def _expect_readings_as_logged(nodes: list[Node]) -> None:
    """Each new node expects a reading as often as its busiest logged feed: emoncms feeds are
    made at the interval their node posts at (or coarser), so a 60 s emonTH is not judged by
    the default 10 s and alarmed "silent" (3 intervals) between every two readings."""
    for node in nodes:
        feeds = {
            step["feed"]
            for steps in Sensor.objects.filter(node=node).values_list("processes", flat=True)
            for step in steps
            if isinstance(step, dict) and step.get("process") in LOGGING and "feed" in step
        }
        intervals = Feed.objects.filter(pk__in=feeds).values_list("interval", flat=True)
        expected = min(intervals, default=INTERVAL_WITHOUT_FEEDS_S)
        node.interval = min(max(int(expected), 1), MAX_INTERVAL_S)
        node.save(update_fields=["interval"])


def _feed_files(emon: EmonSite, feed: EmonFeed) -> tuple[Path, ...] | None:
    if feed.engine == PHPFINA:
        pair = (
            emon.files / "phpfina" / f"{feed.id}.meta",
            emon.files / "phpfina" / f"{feed.id}.dat",
        )
        return pair if all(p.exists() for p in pair) else None
    single = emon.files / "phptimeseries" / f"feed_{feed.id}.MYD"
    return (single,) if single.exists() else None


FEED_NAME_MAX = 100  # Feed.name's max_length
MAX_RENAME_TRIES = 100


def _free_name(tag: str, name: str, emon_id: int, source: str) -> str | None:
    """`name` if the tag has no feed of that name, else the first free one of
    `name (<source> <id>)`, `name (<source> <id> 2)`, ...: two emonPis both with
    `emonpi/use_kwh` both move, the second's renamed (and reported by the caller). None when
    MAX_RENAME_TRIES names are all taken."""
    name = (name or f"feed {emon_id}")[:FEED_NAME_MAX]
    if not Feed.objects.filter(tag=tag, name=name).exists():
        return name
    for n in range(1, MAX_RENAME_TRIES + 1):
        suffix = f" ({source} {emon_id})" if n == 1 else f" ({source} {emon_id} {n})"
        candidate = name[: max(FEED_NAME_MAX - len(suffix), 1)] + suffix
        candidate = candidate[:FEED_NAME_MAX]
        if not Feed.objects.filter(tag=tag, name=candidate).exists():
            return candidate
    return None


def _import_feeds(
    emon: EmonSite, source: str, feed_dir: FeedDir, buffer, report: Report
) -> dict[int, int]:
    feed_map: dict[int, int] = {}
    for feed in emon.feeds:
        label = f"feed {feed.id} {feed.tag}:{feed.name}"
        if feed.process_list.strip():
            report.problems.append(f"{label}: its own process list {feed.process_list[:60]!r} "
                                   "(virtual/post-processed feed) is not imported")  # fmt: skip
        origin = EmoncmsOrigin.objects.filter(
            source=source, kind=EmoncmsOrigin.Kind.FEED, emoncms_id=feed.id, feed__isnull=False
        ).first()
        if origin is not None:
            feed_map[feed.id] = origin.feed_id
            report.feeds_kept += 1
            emoncms_files.seed_last_value(buffer, feed_dir(origin.feed_id), origin.feed_id)
            continue
        if feed.engine not in (PHPFINA, PHPTIMESERIES):
            engine = ENGINES.get(feed.engine, str(feed.engine))
            report.problems.append(f"{label}: engine {engine} is not imported "
                                   "(only PHPFina and PHPTimeSeries data moves)")  # fmt: skip
            continue
        files = _feed_files(emon, feed)
        if files is None:
            report.problems.append(f"{label}: its data files are not in the source")
            continue
        name = _free_name(feed.tag, feed.name, feed.id, source)
        if name is None:
            report.problems.append(f"{label}: the tag already has {MAX_RENAME_TRIES} feeds of "
                                   "this name and its renamed forms: not imported")  # fmt: skip
            continue
        try:
            our_id = _import_feed_data(feed, name, files, source, feed_dir)
        except (phpfina.FeedError, phptimeseries.PHPTimeSeriesError, FileExistsError) as exc:
            report.problems.append(f"{label}: data refused: {exc}")
            continue
        except IntegrityError:
            # Another import or a person took the name between the check and the insert.
            report.problems.append(f"{label}: the name {name!r} was taken meanwhile: not "
                                   "imported (run the import again)")  # fmt: skip
            continue
        if name != feed.name:
            report.feeds_renamed.append(f"{label} -> {feed.tag}:{name}")
        feed_map[feed.id] = our_id
        report.feeds_imported += 1
        emoncms_files.seed_last_value(buffer, feed_dir(our_id), our_id)
    return feed_map


def _import_feed_data(
    feed: EmonFeed, name: str, files: tuple[Path, ...], source: str, feed_dir_of: FeedDir
) -> int:
    with transaction.atomic():
        ours = Feed.objects.create(
            name=name, tag=feed.tag, unit=feed.unit,
            public=feed.public, interval=10,
            description=f"Imported from emoncms {source} feed {feed.id} "
                        f"({ENGINES.get(feed.engine)})",
        )  # fmt: skip
        feed_dir = feed_dir_of(ours.pk)  # the new id's shard (feeds/store/shards.py)
        feed_dir.mkdir(parents=True, exist_ok=True)
        try:
            if feed.engine == PHPFINA:
                meta = emoncms_files.copy_phpfina(files[0], files[1], feed_dir, ours.pk)
                interval = meta.interval
                _refuse_future(meta.start_time, time.time())
            else:
                interval = phptimeseries.convert(files[0], feed_dir, ours.pk).interval
            if not 1 <= interval <= 86400:
                raise phpfina.FeedError(f"interval {interval} s is not 1 s to a day")
        except BaseException:
            for path in (phpfina.meta_path(feed_dir, ours.pk), phpfina.dat_path(feed_dir, ours.pk)):
                path.unlink(missing_ok=True)
            raise  # the transaction drops the Feed row
        ours.interval = interval
        ours.save(update_fields=["interval"])
        EmoncmsOrigin.objects.create(
            source=source, kind=EmoncmsOrigin.Kind.FEED, emoncms_id=feed.id, feed=ours
        )
    return ours.pk


def _refuse_future(start_time: int, now: float) -> None:
    """A feed whose data starts later than the store accepts a live point
    (BMS_INGEST_MAX_FUTURE_S ahead) is refused: imported, every live point after it would be
    refused as older than the file (a crafted meta dated 2096 did that)."""
    bound = now + settings.BMS_INGEST_MAX_FUTURE_S
    if start_time > bound:
        raise phpfina.FeedError(
            f"its data starts at {start_time}, more than BMS_INGEST_MAX_FUTURE_S "
            f"({settings.BMS_INGEST_MAX_FUTURE_S} s) after now ({int(now)}): not imported"
        )


def _radio_id(name: str) -> int | None:
    """emoncms's node id as a radio id: emonhub with `sendnames = 0` posts node `10` as 10."""
    return int(name) if name.isascii() and name.isdigit() and int(name) <= 255 else None


def _node_for(nodeid: str, site: Site | None, source: str, report: Report) -> Node | None:
    """This site's node for an emoncms node id: names and radio ids are per site, so another
    site's node of the same name is never touched (it is another building's)."""
    name = emoncms_name(nodeid).strip()
    if not is_emoncms_name(name):
        report.problems.append(f"node {nodeid[:40]!r}: not a usable node name")
        return None
    here = Node.objects.filter(site=site) if site is not None else Node.objects.filter(site=None)
    radio = _radio_id(name)
    node = here.filter(name=name).first()
    if node is not None:
        if radio is not None and node.node_id is None and not here.filter(node_id=radio).exists():
            node.node_id = radio  # posts by radio id (sendnames = 0) find it from now on
            node.save(update_fields=["node_id"])
        if not _made_by_import(node, source):  # a node that was here first: said every run
            report.nodes_merged.append(
                f"node {name} -> the existing node '{node.name}' (same name), no new node made"
            )
        return node
    if radio is not None:
        holder = here.filter(node_id=radio).first()
        if holder is not None:
            # The device posting as radio id `name` is already here under another name: one
            # device, so one node (a second one could not take the radio id anyway).
            report.nodes_merged.append(
                f"node {name} -> the existing node '{holder.name}' (radio id {radio}): its "
                f"inputs are imported into '{holder.name}', no node '{name}' was made"
            )
            return holder
    # No key of its own: a gateway key of the site posts for it, as for a node a gateway
    # registers (`GatewayKey` in sensors/models.py); `createnode --rotate` gives it one if needed.
    node = Node.objects.create(name=name, node_id=radio, site=site, protocol=Node.Protocol.EMONCMS,
                               description=IMPORTED_NODE)  # fmt: skip
    report.nodes_created += 1
    report.new_nodes.append(node)
    return node


def _made_by_import(node: Node, source: str) -> bool:
    """Whether an earlier run of this import made `node` (so finding it by name is not a
    merge): it has the description the import gives and inputs this source brought. A node
    that was here first is a merge on every run, so a re-run's count is the first run's."""
    return (
        node.description == IMPORTED_NODE
        and EmoncmsOrigin.objects.filter(source=source, sensor__node=node).exists()
    )


IMPORTED_NODE = "Imported from emoncms"


@dataclass
class _Collision:
    """An emoncms input whose node merged into a node of ours that already has an input of its
    key, taken from another emoncms input by this same import (emoncms nodes `emontx` and
    `10` both merged into `emontx`, radio id 10, each with a `power1`)."""

    inp: EmonInput
    node: Node
    key: str
    taken_from: int  # the emoncms input that took the key


def _import_inputs(
    emon: EmonSite, site: Site | None, source: str, report: Report
) -> tuple[dict[int, Sensor], dict[int, int], list[_Collision]]:
    """(emoncms id -> sensor new to us this run, emoncms id -> sensor id of every input,
    inputs that lost their key to another input of this import)."""
    collisions: list[_Collision] = []
    sensors: dict[int, Sensor] = {}
    input_ids: dict[int, int] = {}
    nodes: dict[str, Node | None] = {}
    for inp in emon.inputs:
        key = emoncms_name(inp.name).strip()
        if not is_emoncms_name(key):
            report.problems.append(f"input {inp.id} {inp.name[:40]!r}: not a usable input name")
            continue
        if inp.nodeid not in nodes:
            nodes[inp.nodeid] = _node_for(inp.nodeid, site, source, report)
        node = nodes[inp.nodeid]
        if node is None:
            continue
        # The description as emoncms shows it (free text: quotes and all), else the key.
        name = (" ".join(inp.description.split()) or key)[:100]
        origin = EmoncmsOrigin.objects.filter(
            source=source, kind=EmoncmsOrigin.Kind.INPUT, emoncms_id=inp.id, sensor__isnull=False
        ).first()
        if origin is not None:
            input_ids[inp.id] = origin.sensor_id
            report.inputs_kept += 1
            continue
        with transaction.atomic():
            sensor, created = Sensor.objects.get_or_create(
                node=node, key=key, defaults={"name": name}
            )
            if not created and not _adoptable(sensor):
                taken = EmoncmsOrigin.objects.filter(
                    source=source, kind=EmoncmsOrigin.Kind.INPUT, sensor=sensor
                ).first()
                if taken is not None:  # this import's own doing: said once the feeds are known
                    collisions.append(_Collision(inp, node, key, taken.emoncms_id))
                    continue
                report.problems.append(
                    f"input {inp.id} {inp.nodeid[:40]}:{key}: the input {key} of '{node.name}' "
                    "was already configured here (by hand or by another import); left as it is"
                )
                continue
            EmoncmsOrigin.objects.create(
                source=source, kind=EmoncmsOrigin.Kind.INPUT, emoncms_id=inp.id, sensor=sensor
            )
        if created:
            report.inputs_created += 1
        else:  # posted here before the import (auto-created): it takes emoncms's processes
            sensor.auto_created = False
            sensor.save(update_fields=["auto_created"])
            report.inputs_adopted += 1
        sensors[inp.id] = sensor
        input_ids[inp.id] = sensor.pk
    return sensors, input_ids, collisions


def _collision_line(c: _Collision, emon: EmonSite, feed_map: dict[int, int]) -> str:
    """What happened to an input that lost its key to another input of this import: which
    emoncms node took it, that its list was not applied, and the history it leaves unfed."""
    nodes = {i.id: i.nodeid for i in emon.inputs}
    other = nodes.get(c.taken_from)
    by = f"emoncms node '{other[:40]}'" if other is not None else "another emoncms node"
    line = (
        f"input {c.inp.id} {c.inp.nodeid[:40]}:{c.key}: emoncms node '{c.inp.nodeid[:40]}' "
        f"merged into '{c.node.name}', whose input {c.key} this import already took from {by} "
        f"(input {c.taken_from}); its process list was not applied"
    )
    for emon_feed in emoncms_processlist.logged_feeds(c.inp.process_list):
        ours = feed_map.get(emon_feed)
        if ours is not None and not Sensor.objects.filter(feed_id=ours).exists():
            line += f"; its history feed {ours} (emoncms feed {emon_feed}) was imported but "
            line += "nothing logs to it"
    return line


def _adoptable(sensor: Sensor) -> bool:
    """Only a "new input" that a gateway auto-created here before the import takes emoncms's
    processes: never one an engineer configured, nor one another import brought."""
    imported = EmoncmsOrigin.objects.filter(sensor=sensor).exists()
    return sensor.auto_created and not imported


def remove_staging(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
