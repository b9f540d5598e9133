"""Feed shards: which writer commits a feed, and which directory holds its files.

A feed belongs to shard `feed_id % N`. Each shard has one commit queue (Celery routes
`commit_buffer(shard)` there, see `route_commit`), one writer that holds the shard's Redis
lock (feeds/store/buffer.py), and one directory. N = 1 is the one-machine layout: one queue
(`commit`), one lock, the feed files directly in BMS_FEED_DIR.

The layout in force is written down in `<BMS_FEED_DIR>/shards.json` (`{"shards": N, "dirs":
[...]}`) by the first commit and by `manage.py reshard_feeds`: the files are where that record
says, so reads use it; a commit whose settings (BMS_FEED_SHARDS, BMS_FEED_SHARD_DIRS) disagree
with it refuses to write (`LayoutMismatch`: a process not restarted after a re-shard must not
create a second copy of a feed in the old place), and its points wait in Redis.

No Django here: callers pass the root directory and the configured layout.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RECORD_NAME = "shards.json"
MAX_SHARDS = 64  # a queue, a worker and a lock each: more is a configuration mistake
COMMIT_QUEUE = "commit"
# A feed's files, its summaries (feeds/store/summaries.py: moved along, then rebuilt, as the
# move changes the .dat's ctime) and the leftovers of an interrupted write (feeds/store/phpfina.py):
# all move together.
FEED_FILE = re.compile(r"^(\d+)\.(dat|meta|sum|sum16|sum256|sum4096)(\.tmp|\.new)?$")


class LayoutError(ValueError):
    """A shard count or directory list that cannot be used."""


class LayoutMismatch(RuntimeError):
    """This process's configured layout is not the one the files are in."""


@dataclass(frozen=True)
class Layout:
    shards: int
    dirs: tuple[Path, ...]

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= MAX_SHARDS:
            raise LayoutError(f"shards must be 1..{MAX_SHARDS}, not {self.shards}")
        if len(self.dirs) != self.shards:
            raise LayoutError(f"{self.shards} shards need {self.shards} directories")
        if len(set(self.dirs)) != len(self.dirs):
            raise LayoutError("two shards cannot share a directory")

    def shard_of(self, feed_id: int) -> int:
        return int(feed_id) % self.shards

    def dir_of(self, feed_id: int) -> Path:
        return self.dirs[self.shard_of(feed_id)]

    def as_record(self) -> dict:
        return {"shards": self.shards, "dirs": [str(d) for d in self.dirs]}


def make_layout(root: str | os.PathLike, shards: int, dirs: Sequence[str] = ()) -> Layout:
    """The layout for `shards`: the given directories (relative ones under `root`), or the
    default: `root` itself for one shard, `root/shard-<k>` for several."""
    root = Path(root)
    if dirs:
        paths = tuple(Path(os.path.normpath(root / d)) for d in dirs)  # absolute d wins
    elif shards == 1:
        paths = (root,)
    else:
        paths = tuple(root / f"shard-{k}" for k in range(shards))
    return Layout(shards, paths)


def queue_of(shard: int, shards: int) -> str:
    """The Celery queue of a shard's commits: `commit` with one shard (as before sharding)."""
    return COMMIT_QUEUE if shards == 1 else f"{COMMIT_QUEUE}-{int(shard)}"


def read_record(root: str | os.PathLike) -> Layout | None:
    """The layout recorded in the feed directory, or None before the first commit."""
    try:
        raw = json.loads((Path(root) / RECORD_NAME).read_text())
    except FileNotFoundError:
        return None
    return Layout(int(raw["shards"]), tuple(Path(d) for d in raw["dirs"]))


def write_record(root: str | os.PathLike, layout: Layout) -> None:
    """Record the layout atomically (write, fsync, rename, fsync the directory): a crash
    leaves the old record or the new one."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{RECORD_NAME}.{os.getpid()}.new"
    with open(tmp, "w") as f:
        json.dump(layout.as_record(), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / RECORD_NAME)
    fsync_dir(root)


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_or_record(root: str | os.PathLike, configured: Layout) -> None:
    """Before a commit writes: the recorded layout must be the configured one (written down
    when there is none yet). Raises LayoutMismatch otherwise."""
    recorded = read_record(root)
    if recorded is None:
        for d in configured.dirs:
            d.mkdir(parents=True, exist_ok=True)
        write_record(root, configured)
    elif recorded != configured:
        raise LayoutMismatch(
            f"the feed files are in {recorded.shards} shard(s) ({RECORD_NAME}) but this process "
            f"is configured for {configured.shards}: restart it with the new BMS_FEED_SHARDS / "
            "BMS_FEED_SHARD_DIRS (docs/DEPLOYMENT.md); its points wait in Redis meanwhile"
        )


def feed_files(directory: Path) -> list[tuple[int, Path]]:
    """(feed id, path) of every feed file directly in `directory` (shard subdirectories and
    the record are not feed files)."""
    if not directory.is_dir():
        return []
    out = []
    for path in directory.iterdir():
        m = FEED_FILE.match(path.name)
        if m and path.is_file():
            out.append((int(m.group(1)), path))
    return sorted(out)
