"""manage.py import_emoncms: move an emoncms site here, or register a folder of PHPFina files.

    import_emoncms BACKUP.tar.gz [--site SLUG]          the archive of emoncms's backup module
    import_emoncms --url https://emoncms.example --apikey-file KEYFILE [--site SLUG]
    import_emoncms /var/lib/phpfina [--ids 5 9] [--tag emoncms]   feed files only (as before)

The first two bring inputs, process lists, feeds (names, tags, units, data) and write a report
of what could not be brought over (sensors/emoncms_import/site.py); run twice, nothing doubles. The
folder form registers each `<n>.meta` + `<n>.dat` pair as a new Feed named `<n>`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from feeds.emoncms import files as emoncms_files
from feeds.models import Feed
from feeds.store import phpfina, service
from sensors.emoncms_import import site as emoncms_site
from sensors.models import Site

BAR_WIDTH = 30
APIKEY_ENV = "EMONCMS_APIKEY"


class Command(BaseCommand):
    help = (
        "Move an emoncms site here: SOURCE is the .tar.gz its backup module makes, or use "
        "--url with a read key (--apikey-file or EMONCMS_APIKEY) for a running emoncms. Inputs, "
        "process lists, feeds and their data are imported, and what could not be is reported. "
        "SOURCE may also be a folder of PHPFina files (<id>.meta + <id>.dat): each pair becomes "
        "a feed, copied to BMS_FEED_DIR under its new id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", nargs="?", help="backup .tar.gz, or a phpfina folder")
        parser.add_argument("--url", help="a running emoncms, e.g. http://emonpi.local")
        parser.add_argument(
            "--apikey-file",
            help=f"file holding the emoncms read API key (default: ${APIKEY_ENV}); never the "
            "key itself on the command line, where ps shows it",
        )
        parser.add_argument("--site", help="site slug for new nodes (default: the only site)")
        parser.add_argument(
            "--source-name", default="emoncms",
            help="name of this emoncms site (default 'emoncms'); a second run with the same name "
            "brings in only what the first did not and changes nothing already here; use "
            "another name for a second emoncms",
        )  # fmt: skip
        parser.add_argument("--userid", type=int, help="emoncms user, when the dump has several")
        parser.add_argument(
            "--max-gb", type=float, default=emoncms_site.DEFAULT_MAX_BYTES / 1024**3,
            help="bound on the data read from the archive or over HTTP (default 20 GB)",
        )  # fmt: skip
        parser.add_argument("--ids", type=int, nargs="+", help="folder form: only these ids")
        parser.add_argument("--tag", default="emoncms", help="folder form: tag of the new feeds")
        parser.add_argument("--public", action="store_true", help="folder form: public feeds")

    def handle(self, *args, **opts) -> None:
        source = opts["source"]
        if opts["url"]:
            if source:
                raise CommandError("give a SOURCE or --url, not both")
            return self._site(opts, url=opts["url"])
        if not source:
            raise CommandError("give a backup .tar.gz, a phpfina folder, or --url")
        path = Path(source)
        if path.is_dir():
            return self._folder(path, opts["ids"], opts["tag"], opts["public"])
        if path.is_file():
            return self._site(opts, archive=path)
        raise CommandError(f"{path} is not a directory or a file")

    # --- a whole site ---------------------------------------------------------------------------

    def _site(self, opts: dict, *, archive: Path | None = None, url: str | None = None) -> None:
        site = self._pick_site(opts["site"])
        taken = emoncms_site.other_sites_of_source(opts["source_name"], site)
        if taken:
            # Feed and input ids repeat between emonPis: under one source name the second
            # would be "already here" and nothing of it imported.
            raise CommandError(
                f"source name '{opts['source_name']}' was imported into {', '.join(taken)}; "
                f"this import goes to {site.name if site else 'no site'}: give it its own "
                "--source-name (one per emoncms), nothing was imported"
            )
        feed_dir = Path(settings.BMS_FEED_DIR)
        feed_dir.mkdir(parents=True, exist_ok=True)
        max_bytes = int(opts["max_gb"] * 1024**3)
        # Staging beside the feed files: same file system, and never a shared /tmp.
        staging = Path(tempfile.mkdtemp(prefix=".emoncms-import-", dir=feed_dir))
        try:
            try:
                if archive is not None:
                    emon = emoncms_site.from_backup(
                        archive, staging, userid=opts["userid"], max_bytes=max_bytes
                    )
                else:
                    emon = emoncms_site.from_http(
                        url, self._apikey(opts["apikey_file"]), staging, max_bytes=max_bytes
                    )
            except emoncms_site.SourceError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(
                f"read {len(emon.inputs)} inputs and {len(emon.feeds)} feeds from "
                f"{archive.name if archive else url}"
            )
            report = emoncms_site.import_site(
                emon, site=site, source=opts["source_name"], feed_dir=service.feed_dir,
                buffer=service.get_buffer(),
            )  # fmt: skip
        finally:
            emoncms_site.remove_staging(staging)
        self.stdout.write(report.summary())
        for line in report.nodes_merged:
            self.stdout.write(f"  merged into an existing node: {line}")
        for line in report.feeds_renamed:
            self.stdout.write(f"  renamed, the name was taken: {line}")
        for line in report.problems:
            self.stdout.write(f"  not brought over: {line}")

    def _pick_site(self, slug: str | None) -> Site | None:
        if slug:
            site = Site.objects.filter(slug=slug).first()
            if site is None:
                raise CommandError(f"no site with slug '{slug}'")
            return site
        sites = list(Site.objects.all()[:2])
        if len(sites) > 1:
            raise CommandError("several sites: choose one with --site SLUG")
        return sites[0] if sites else None

    def _apikey(self, key_file: str | None) -> str:
        if key_file:
            try:
                key = Path(key_file).read_text()[:200].strip()
            except OSError as exc:
                raise CommandError(f"--apikey-file: {exc}") from exc
        else:
            key = os.environ.get(APIKEY_ENV, "").strip()
        if not key:
            raise CommandError(f"--url needs a read API key: --apikey-file FILE or ${APIKEY_ENV}")
        return key

    # --- a folder of PHPFina pairs ----------------------------------------------------------------

    def _folder(self, source: Path, ids: list[int] | None, tag: str, public: bool) -> None:
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
            outcome = self._import_pair(source, emon_id, tag, public)
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

    def _import_pair(self, source: Path, emon_id: int, tag: str, public: bool) -> str:
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
        with transaction.atomic():
            feed = Feed.objects.create(
                name=str(emon_id), tag=tag, interval=meta.interval, public=public,
                description=f"Imported from emoncms feed {emon_id} ({source})",
            )  # fmt: skip
            target = service.feed_dir(feed.id)  # the new id's shard (feeds/store/shards.py)
            target.mkdir(parents=True, exist_ok=True)
            try:
                emoncms_files.copy_phpfina(meta_file, dat_file, target, feed.id)
            except FileExistsError as exc:
                raise CommandError(str(exc)) from exc
        emoncms_files.seed_last_value(service.get_buffer(), target, feed.id)
        points = dat_file.stat().st_size // phpfina.VALUE_SIZE
        return f"emoncms {emon_id} -> feed {feed.id} ({meta.interval} s, {points:,} points)"
