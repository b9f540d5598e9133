"""Move the feed files to another number of shards (or other shard directories).

    manage.py reshard_feeds --to 4 [--dirs /srv/f0,/srv/f1,/srv/f2,/srv/f3] [--wait 300]

Web and ingest keep running: readings keep arriving in the Redis buffer. The command
  1. holds the commit lock of every shard, old and new (waiting for commits running now);
  2. drains the buffer: commits and fsyncs every shard's points into the old layout;
  3. links (or, across filesystems, copies and fsyncs) each feed's files into its new
     shard's directory, then records the new layout in <BMS_FEED_DIR>/shards.json at once;
  4. removes the old names and releases the locks.
Readers follow the record, so they find every feed before, during and after. Points that
arrive during the move wait in Redis; commit workers still configured for the old layout
refuse to write (feeds.store.shards.LayoutMismatch) until restarted with the new
BMS_FEED_SHARDS / BMS_FEED_SHARD_DIRS, and commit them then. docs/DEPLOYMENT.md.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from feeds.store import service, shards


class Command(BaseCommand):
    help = "Move the feed files to N shards (feed_id %% N) without losing a point."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--to", type=int, required=True, help="the new number of shards")
        parser.add_argument(
            "--dirs", default="", help="comma-separated directory per shard (default: shard-<k>)"
        )
        parser.add_argument(
            "--wait", type=float, default=300.0, help="seconds to wait for running commits"
        )

    def handle(self, *args, to: int, dirs: str, wait: float, **options) -> None:
        root = Path(settings.BMS_FEED_DIR)
        try:
            new = shards.make_layout(root, to, [d for d in dirs.split(",") if d.strip()])
        except shards.LayoutError as exc:
            raise CommandError(f"--to/--dirs: {exc}") from exc
        old = service.layout()
        if new == old:
            self.stdout.write(f"The feeds are in {to} shard(s) already; nothing to do.")
            return
        try:
            held = service.acquire_all_commit_locks(max(old.shards, new.shards), wait)
        except TimeoutError as exc:
            raise CommandError(f"{exc}: a commit is still running; try again") from exc
        try:
            drained = 0
            for k in range(old.shards):
                buffer, token = held[k]
                view = service.get_buffer(k, old.shards)
                result = service.commit_shard(view, old.dirs[k], sync=True, token=token)
                drained += result["points"]
            moves = _plan(old, new)
            for src, dst in moves:
                dst.parent.mkdir(parents=True, exist_ok=True)
                _link_or_copy(src, dst)
                service.renew_commit_locks(held)
            for d in {dst.parent for _, dst in moves} | set(new.dirs):
                d.mkdir(parents=True, exist_ok=True)
                shards.fsync_dir(d)
            shards.write_record(root, new)  # from here on readers and writers use the new one
            for src, _ in moves:
                src.unlink()
            for d in {src.parent for src, _ in moves}:
                shards.fsync_dir(d)
        finally:
            service.release_commit_locks(held)
        feeds = len({dst.name.split(".")[0] for _, dst in moves})
        self.stdout.write(
            f"Moved {feeds} feed(s) ({len(moves)} files) from {old.shards} to {new.shards} "
            f"shard(s); {drained} buffered point(s) committed first. Now set "
            f"BMS_FEED_SHARDS={new.shards}"
            + (f" and BMS_FEED_SHARD_DIRS={dirs}" if dirs else "")
            + " and restart the workers and beat (one commit worker per shard queue)."
        )


def _plan(old: shards.Layout, new: shards.Layout) -> list[tuple[Path, Path]]:
    """(from, to) of every feed file that changes directory; refuses before moving anything
    if a target name is taken (a leftover that the move would overwrite)."""
    moves = []
    for directory in old.dirs:
        for feed_id, path in shards.feed_files(directory):
            target = new.dir_of(feed_id) / path.name
            if target == path:
                continue
            if target.exists() and not os.path.samefile(path, target):  # same: a rerun
                raise CommandError(f"{target} exists already; move or remove it first")
            moves.append((path, target))
    return moves


def _link_or_copy(src: Path, dst: Path) -> None:
    """A second name for the file (same filesystem), or a durable copy (another one)."""
    if dst.exists():  # linked by an interrupted run (_plan checked it is the same file)
        return
    try:
        os.link(src, dst)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:  # another filesystem: copy instead
            raise
    tmp = dst.with_name(dst.name + ".resharding")
    shutil.copy2(src, tmp)  # keeps the mtime, which phpfina's recovery compares
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dst)
