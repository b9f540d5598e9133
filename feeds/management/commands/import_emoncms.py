"""manage.py import_emoncms DIR: register an emoncms PHPFina folder as feeds.

Each `<n>.meta` + `<n>.dat` pair becomes a new Feed (tag "emoncms" unless --tag, name "<n>",
the meta's interval) whose files are copied to BMS_FEED_DIR under the NEW feed's id: our ids
come from the database, so emoncms feed 5 may become feed 12. The source folder is only read.
A pair already imported (same tag and name) is skipped, so the command can be re-run.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from feeds import phpfina
from feeds.models import Feed

BAR_WIDTH = 30
COPY_CHUNK = 8 * 1024 * 1024


class Command(BaseCommand):
    help = (
        "Register emoncms PHPFina files (<id>.meta + <id>.dat) in DIR as feeds, copying them "
        "to BMS_FEED_DIR under each new feed's id. Corrupt pairs are refused and named."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", help="emoncms phpfina folder, e.g. /var/lib/phpfina")
        parser.add_argument("--ids", type=int, nargs="+", help="only these emoncms feed ids")
        parser.add_argument("--tag", default="emoncms", help="tag of the new feeds")
        parser.add_argument("--public", action="store_true", help="mark the new feeds public")

    def handle(self, *args, directory: str, ids: list[int] | None, tag: str, public: bool,
               **options) -> None:  # fmt: skip
        source = Path(directory)
        if not source.is_dir():
            raise CommandError(f"{source} is not a directory")
        wanted = sorted(int(p.stem) for p in source.glob("*.meta") if p.stem.isdigit())
        if ids:
            missing = sorted(set(ids) - set(wanted))
            if missing:
                raise CommandError(f"no .meta file for id(s) {missing} in {source}")
            wanted = [i for i in wanted if i in set(ids)]
        if not wanted:
            raise CommandError(f"no <id>.meta files in {source}")
        refused: list[str] = []
        imported = skipped = 0
        for done, emon_id in enumerate(wanted, start=1):
            outcome = self._import_one(source, emon_id, tag, public)
            if outcome.startswith("refused"):
                refused.append(outcome)
                self.stderr.write(outcome)
            elif outcome.startswith("skipped"):
                skipped += 1
            else:
                imported += 1
            self._bar(done, len(wanted), outcome)
        self.stdout.write(
            f"imported {imported}, skipped {skipped} already imported, refused {len(refused)}"
        )
        if refused:
            raise CommandError(f"{len(refused)} feed(s) refused: " + "; ".join(refused))

    def _bar(self, done: int, total: int, note: str) -> None:
        filled = BAR_WIDTH * done // total
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        self.stdout.write(f"[{bar}] {done}/{total} {note}")
        sys.stdout.flush()

    def _import_one(self, source: Path, emon_id: int, tag: str, public: bool) -> str:
        meta_file, dat_file = source / f"{emon_id}.meta", source / f"{emon_id}.dat"
        if not dat_file.exists():
            return f"refused {emon_id}: {dat_file} is missing"
        try:
            meta = phpfina.check_files(meta_file, dat_file)
        except phpfina.CorruptFeed as exc:
            return f"refused {emon_id}: {exc}"
        if meta.interval > 86400:
            return f"refused {emon_id}: interval {meta.interval} s is over a day"
        existing = Feed.objects.filter(tag=tag, name=str(emon_id)).first()
        if existing is not None:
            return f"skipped {emon_id}: already imported as feed {existing.id}"
        target = Path(settings.BMS_FEED_DIR)
        target.mkdir(parents=True, exist_ok=True)
        with transaction.atomic():
            feed = Feed.objects.create(
                name=str(emon_id), tag=tag, interval=meta.interval, public=public,
                description=f"Imported from emoncms feed {emon_id} ({source})",
            )  # fmt: skip
            for src, dst in (
                (dat_file, phpfina.dat_path(target, feed.id)),
                (meta_file, phpfina.meta_path(target, feed.id)),  # meta last: marks it complete
            ):
                if dst.exists():
                    raise CommandError(f"{dst} exists already; refusing to overwrite it")
                _copy_durably(src, dst)
        points = dat_file.stat().st_size // phpfina.VALUE_SIZE
        return f"emoncms {emon_id} -> feed {feed.id} ({meta.interval} s, {points:,} points)"


def _copy_durably(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".importing")
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, COPY_CHUNK)
        fout.flush()
        os.fsync(fout.fileno())
    os.replace(tmp, dst)
