"""An emoncms site as emoncms's backup module archives it, for tests of the archive and the
import (not of the dump's format: that comes from the real tool).

`write_site(folder, now)` writes what an emonPi's emoncms holds: `emoncms.sql`,
`phpfina/<id>.meta/.dat` and `phptimeseries/feed_<id>.MYD` (9 bytes a point: 249, uint32 time,
float32 value, as PHPTimeSeries.php packs "CIf"). `make_archive` tars it as emoncms-export.sh
does (the dump at the top, the engine folders beside it) and gzips it.

The SQL is never written by us: `emoncms.sql` beside this file is what MariaDB's own
`mysqldump` (10.11, no options, as the backup module runs it) wrote for INPUTS and FEEDS in
emoncms's schema (tests/sensors/emoncms_mariadb.py), so tests without a MariaDB still read a
real dump. Made again, on a machine with MariaDB at 127.0.0.1:3306, with

    python tests/sensors/make_emoncms_backup.py --dump

and docs/examples/emoncms-backup.tar.gz, whose dump is made the same way with the prefix
`old-` before every node and tag, with

    python tests/sensors/make_emoncms_backup.py docs/examples/emoncms-backup.tar.gz old-
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

DUMP = Path(__file__).with_name("emoncms.sql")


def real_dump(prefix: str = "", tool: str = "mysqldump") -> bytes:
    """INPUTS and FEEDS loaded into a scratch database of the real MariaDB and dumped by its
    `mysqldump` with no options, as emoncms's backup module runs it. `prefix` goes before every
    node and tag (the docs' example uses `old-`, so its nodes are not those of other pages)."""
    from tests.sensors import emoncms_mariadb as mariadb

    if why := mariadb.unreachable():
        raise SystemExit(f"a real dump needs MariaDB: {why}")
    inputs = [(i, u, prefix + n, *rest) for i, u, n, *rest in INPUTS]
    feeds = [(i, name, u, prefix + tag, *rest) for i, name, u, tag, *rest in FEEDS]
    with mariadb.scratch_database(inputs, feeds) as database:
        return mariadb.dump(database, tool=tool)


def series_end(now: int) -> int:
    """The last slot of the feed files: an hour before `now`, so new posts follow it."""
    return (now - 3600) // INTERVAL * INTERVAL


def write_site(folder: Path, now: int, sql: bytes | None = None) -> Path:
    """emoncms's files for the site in `folder`: emoncms.sql (`sql`, by default the committed
    real dump of INPUTS and FEEDS), phpfina/, phptimeseries/."""
    end = series_end(now)
    start = end - 99 * INTERVAL
    (folder / "phpfina").mkdir(parents=True, exist_ok=True)
    (folder / "phptimeseries").mkdir(exist_ok=True)
    (folder / "emoncms.sql").write_bytes(DUMP.read_bytes() if sql is None else sql)
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
    if sys.argv[1:] == ["--dump"]:
        DUMP.write_bytes(real_dump())
        print(DUMP)
        sys.exit()
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "emoncms-backup.tar.gz")
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    with tempfile.TemporaryDirectory() as staging:
        write_site(Path(staging), int(time.time()), real_dump(prefix))
        make_archive(Path(staging), out)
    print(out)
