"""An emoncms site as emoncms's backup module archives it, made from scratch for tests.

`write_site(folder, now)` writes what an emonPi's emoncms holds: `emoncms.sql` (a mysqldump
of the `input` and `feeds` tables in emoncms's schema, Modules/input/input_schema.php and
Modules/feed/feed_schema.php, with extended inserts and MySQL string escapes, plus a table of
another module whose rows we must skip), `phpfina/<id>.meta/.dat` and
`phptimeseries/feed_<id>.MYD` (9 bytes a point: 249, uint32 time, float32 value, as
PHPTimeSeries.php packs "CIf"). `make_archive` tars it as emoncms-export.sh does (the dump
at the top, the engine folders beside it) and gzips it.

    python tests/sensors/make_emoncms_backup.py OUT.tar.gz [PREFIX]

docs/examples/emoncms-backup.tar.gz was made so, with the prefix `old-`.
"""

from __future__ import annotations

import io
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from feeds.store import phpfina, phptimeseries

INTERVAL = 10
KWH_TOTAL = 1234.5  # the imported kWh feed's last value: accumulation continues from it

# emoncms's own process list encodings: id_num:arg and process__name:arg
INPUTS = [
    # id, userid, nodeid, name, description, processList, time, value
    (1, 1, "emontx1", "power1", "House", "1:1,4:2", 0, 0),
    (2, 1, "emonth", "external temperature", 'Bob\'s "shed"', "process__log_to_feed:3", 0, 0),
    # scale, then phaseshift (deleted in emoncms), then log: kept up to the unmappable step
    (3, 1, "emontx1", "vrms", "", "2:0.5,13:1,1:5", 0, 0),
    (4, 1, "10", "1", "", "schedule__if_not_schedule_zero:3,1:1", 0, 0),
    (5, 1, "emontx1", "power2", "", "1:9", 0, 0),  # a feed that does not exist
]
FEEDS = [
    # id, name, userid, tag, time, value, datatype, public, size, engine, server, processList, unit
    (1, "power1", 1, "emontx1", 0, 0, 1, 0, 0, 5, 0, "", "W"),
    (2, "use_kwh", 1, "emontx1", 0, 0, 1, 1, 0, 5, 0, "", "kWh"),
    (3, "outside", 1, "emonth", 0, 0, 1, 0, 0, 2, 0, "", "°C"),
    (4, "sum", 1, "virtual", 0, 0, 1, 0, 0, 7, 0, "1:1,29:2", ""),
    (5, "vrms", 1, "emontx1", 0, 0, 1, 0, 0, 0, 0, "", "V"),  # MySQL engine: no file
]

CREATE_INPUT = """CREATE TABLE `input` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `userid` int(11) DEFAULT NULL,
  `nodeid` text,
  `name` text,
  `description` text,
  `processList` text,
  `time` int(10) DEFAULT NULL,
  `value` float DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=MyISAM AUTO_INCREMENT=6 DEFAULT CHARSET=utf8mb4;
"""
CREATE_FEEDS = """CREATE TABLE `feeds` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` text,
  `userid` int(11) DEFAULT NULL,
  `tag` text,
  `time` int(10) DEFAULT NULL,
  `value` double DEFAULT NULL,
  `datatype` int(11) NOT NULL,
  `public` tinyint(1) DEFAULT '0',
  `size` int(11) DEFAULT NULL,
  `engine` int(11) NOT NULL DEFAULT '0',
  `server` int(11) NOT NULL DEFAULT '0',
  `processList` text,
  `unit` varchar(10) DEFAULT '',
  PRIMARY KEY (`id`)
) ENGINE=MyISAM AUTO_INCREMENT=6 DEFAULT CHARSET=utf8mb4;
"""


def sql_literal(value: object) -> str:
    """A value as mysqldump writes it (backslash escapes for quotes, backslash, newlines)."""
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    for raw, escaped in (("\\", "\\\\"), ("'", "\\'"), ('"', '\\"'), ("\n", "\\n"),
                         ("\r", "\\r"), ("\0", "\\0")):  # fmt: skip
        text = text.replace(raw, escaped)
    return f"'{text}'"


def insert(table: str, rows: list[tuple]) -> str:
    tuples = ",".join("(" + ",".join(sql_literal(v) for v in row) + ")" for row in rows)
    return f"INSERT INTO `{table}` VALUES {tuples};\n"


def dump_text(prefix: str = "") -> str:
    """The dump; `prefix` goes before every node and tag (the docs' example uses `old-`, so
    its nodes are not those of other pages)."""
    inputs = [(i, u, prefix + n, *rest) for i, u, n, *rest in INPUTS]
    feeds = [(i, name, u, prefix + tag, *rest) for i, name, u, tag, *rest in FEEDS]
    return "".join([
        "-- MySQL dump 10.13  Distrib 8.0.36, for Linux (aarch64)\n",
        "/*!40101 SET NAMES utf8mb4 */;\n",
        "DROP TABLE IF EXISTS `feed_5`;\n",
        "CREATE TABLE `feed_5` (\n  `time` int(10) unsigned NOT NULL,\n  `data` float\n);\n",
        insert("feed_5", [(1_700_000_000 + i, 230.0) for i in range(2000)]),
        "DROP TABLE IF EXISTS `input`;\n", CREATE_INPUT,
        "LOCK TABLES `input` WRITE;\n", insert("input", inputs), "UNLOCK TABLES;\n",
        "DROP TABLE IF EXISTS `feeds`;\n", CREATE_FEEDS,
        "LOCK TABLES `feeds` WRITE;\n", insert("feeds", feeds[:2]), insert("feeds", feeds[2:]),
        "UNLOCK TABLES;\n",
    ])  # fmt: skip


def series_end(now: int) -> int:
    """The last slot of the feed files: an hour before `now`, so new posts follow it."""
    return (now - 3600) // INTERVAL * INTERVAL


def write_site(folder: Path, now: int, prefix: str = "") -> Path:
    """emoncms's files for the site in `folder`: emoncms.sql, phpfina/, phptimeseries/."""
    end = series_end(now)
    start = end - 99 * INTERVAL
    (folder / "phpfina").mkdir(parents=True, exist_ok=True)
    (folder / "phptimeseries").mkdir(exist_ok=True)
    (folder / "emoncms.sql").write_text(dump_text(prefix), encoding="utf-8")
    power = np.full(100, 500.0, "<f4")
    power[50] = np.nan  # a gap, kept as a gap
    kwh = np.linspace(KWH_TOTAL - 10, KWH_TOTAL, 100).astype("<f4")
    kwh[-1] = KWH_TOTAL
    for feed_id, data in ((1, power), (2, kwh)):
        (folder / "phpfina" / f"{feed_id}.meta").write_bytes(phpfina.pack_meta(INTERVAL, start))
        (folder / "phpfina" / f"{feed_id}.dat").write_bytes(data.tobytes())
    (folder / "phptimeseries" / "feed_3.MYD").write_bytes(phptimeseries_points(end))
    return folder


def phptimeseries_points(end: int) -> bytes:
    """A temperature every 60 s for an hour, with one reading 7 s late and one missing."""
    points = [(end - 3600 + 60 * i + (7 if i == 10 else 0), 4.0 + i / 10) for i in range(61)
              if i != 20]  # fmt: skip
    return phptimeseries.pack(points)


def make_archive(folder: Path, archive: Path, extra: list[tarfile.TarInfo] | None = None) -> Path:
    """Tar `folder` as emoncms-export.sh does, gzipped; `extra` members are added as given
    (a test's hostile names)."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder / "emoncms.sql", arcname="emoncms.sql")
        for sub in ("phpfina", "phptimeseries"):
            tar.add(folder / sub, arcname=sub)
        for info in extra or []:
            data = b"x" * info.size if info.isfile() else None
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return archive


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "emoncms-backup.tar.gz")
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    with tempfile.TemporaryDirectory() as staging:
        write_site(Path(staging), int(time.time()), prefix)
        make_archive(Path(staging), out)
    print(out)
