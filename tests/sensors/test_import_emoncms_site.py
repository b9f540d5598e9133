"""manage.py import_emoncms with a whole emoncms site: the backup module's archive (packed by
tests/sensors/make_emoncms_backup.py around a real dump of MariaDB's mysqldump, in emoncms's
schema and file formats) or a running emoncms over its API, then new readings posted as
emonhub posts them. Every mysqldump mode: test_import_emoncms_mariadb.py."""

from __future__ import annotations

import json
import tarfile
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path
from threading import Thread

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from feeds.models import Feed
from feeds.store import phpfina, service
from sensors.ingest import node_state
from sensors.ingest import stream as ingest_stream
from sensors.ingest.drain import drain_shard
from sensors.models import EmoncmsOrigin, GatewayKey, Node, Sensor, Site
from tests.sensors import make_emoncms_backup as backup
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db

NOW = int(time.time())
END = backup.series_end(NOW)


@pytest.fixture
def emoncms_files(tmp_path):
    return backup.write_site(tmp_path / "emoncms", NOW)


@pytest.fixture
def archive(tmp_path, emoncms_files):
    return backup.make_archive(emoncms_files, tmp_path / "emoncms-backup-emonpi-2026-11-23.tar.gz")


def run(*args) -> str:
    out = StringIO()
    call_command("import_emoncms", *map(str, args), stdout=out, stderr=StringIO())
    return out.getvalue()


def feed(tag, name) -> Feed:
    return Feed.objects.get(tag=tag, name=name)


def sensor(node, key) -> Sensor:
    return Sensor.objects.get(node__name=node, key=key)


def assert_site_imported(out: str, feed_dir: Path, emoncms_files: Path, site: Site) -> None:
    power, kwh, outside = (
        feed("emontx1", "power1"),
        feed("emontx1", "use_kwh"),
        feed("emonth", "outside"),
    )
    assert (power.unit, power.interval, power.public) == ("W", 10, False)
    assert (kwh.unit, kwh.public) == ("kWh", True)
    assert (outside.unit, outside.interval) == ("°C", 60)  # PHPTimeSeries became PHPFina
    for ours, theirs in ((power, 1), (kwh, 2)):
        for ext in ("meta", "dat"):
            assert (feed_dir / f"{ours.pk}.{ext}").read_bytes() == (
                emoncms_files / "phpfina" / f"{theirs}.{ext}"
            ).read_bytes()
    assert not Feed.objects.filter(name__in=["sum", "vrms"]).exists()

    nodes = {n.name: n for n in Node.objects.all()}
    assert set(nodes) == {"emontx1", "emonth", "10"}
    assert nodes["10"].node_id == 10 and all(n.site == site for n in nodes.values())
    assert sensor("emontx1", "power1").processes == [
        {"process": "log_to_feed", "feed": power.pk},
        {"process": "power_to_kwh", "feed": kwh.pk},
    ]
    temp = sensor("emonth", "external temperature")
    assert temp.processes == [{"process": "log_to_feed", "feed": outside.pk}]
    # the description as emoncms shows it, quotes kept (free text, not a key)
    assert (temp.name, temp.unit, temp.feed_id) == ('Bob\'s "shed"', "°C", outside.pk)
    assert (sensor("emontx1", "power1").name, sensor("emontx1", "power1").unit) == ("House", "W")
    # kept up to the first step that cannot be mapped; the rest reported, not dropped silently
    assert sensor("emontx1", "vrms").processes == [{"process": "scale", "arg": 0.5}]
    assert sensor("10", "1").processes == []
    assert sensor("emontx1", "power2").processes == []
    for words in (
        "input 3 emontx1:vrms: step 2 13:1 (",
        "input 3 emontx1:vrms: step 3 1:5 (left out: it follows an unmapped step)",
        "input 4 10:1: step 1 schedule__if_not_schedule_zero:3 (process "
        "'schedule__if_not_schedule_zero' is not one of emoncms's core processes)",
        "input 5 emontx1:power2: step 1 1:9 (log_to_feed: feed 9 was not imported)",
        "feed 4 virtual:sum: engine virtual is not imported",
        "feed 4 virtual:sum: its own process list '1:1,29:2'",
        "feed 5 emontx1:vrms: engine MySQL is not imported",
    ):
        assert f"not brought over: {words}" in out, (words, out)


def test_a_backup_brings_inputs_process_lists_feeds_and_data(
    archive, feed_dir, emoncms_files, site, redis_client
):
    out = run(archive)
    assert "read 5 inputs and 5 feeds" in out
    assert (
        "feeds: 3 imported, 0 already here; inputs: 5 created, 0 adopted, 0 already here; nodes: 3 created"
        in out
    )
    assert_site_imported(out, feed_dir, emoncms_files, site)
    kwh = feed("emontx1", "use_kwh")
    # the last value comes from the file, so accumulators carry on from it
    assert service.last_value(kwh.pk) == (END, backup.KWH_TOTAL)
    assert service.last_value(feed("emontx1", "power1").pk) == (END, 500.0)
    assert not list(feed_dir.glob(".emoncms-import-*"))  # staging removed


def test_running_it_twice_doubles_nothing(archive, feed_dir, site, redis_client):
    run(archive)
    counts = [m.objects.count() for m in (Feed, Node, Sensor, EmoncmsOrigin)]
    processes = dict(Sensor.objects.values_list("pk", "processes"))
    out = run(archive)
    assert (
        "feeds: 0 imported, 3 already here; inputs: 0 created, 0 adopted, 5 already here; nodes: 0 created"
        in out
    )
    assert [m.objects.count() for m in (Feed, Node, Sensor, EmoncmsOrigin)] == counts
    assert dict(Sensor.objects.values_list("pk", "processes")) == processes
    assert len(list(feed_dir.glob("*.dat"))) == 3


def post(key: str, node: str, t: int, values: dict) -> bytes:
    response = Client().get(
        "/input/post.json",
        {"node": node, "time": t, "fulljson": json.dumps(values)},
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 200, response.content
    return response.content


def drain_all() -> None:
    for shard in range(ingest_stream.shards()):
        drain_shard(shard, budget_s=5)


def test_new_readings_land_in_the_same_feeds_and_kwh_continues(
    archive, feed_dir, site, redis_client
):
    run(archive)
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    t1 = (NOW - 60) // 10 * 10
    post(key, "emontx1", t1, {"power1": 3600})
    post(key, "emontx1", t1 + 10, {"power1": 3600})
    post(key, "emonth", t1, {"external temperature": 7.25})
    drain_all()
    service.commit_all(now=NOW)
    power, kwh, outside = (
        feed("emontx1", "power1"),
        feed("emontx1", "use_kwh"),
        feed("emonth", "outside"),
    )
    assert service.read(power.pk, t1, t1 + 10, 10) == [
        [t1 * 1000, 3600.0],
        [(t1 + 10) * 1000, 3600.0],
    ]
    # On top of the imported 1234.5 (not from 0). As emoncms's power_to_kwh, the first
    # reading counts its power over the time since the file's last point (under 2 h), then
    # 3600 W for 10 s is 0.01 kWh.
    since_import = backup.KWH_TOTAL + 3600 * (t1 - END) / 3_600_000
    assert 0 < t1 - END < 7200
    [[_, first], [_, second]] = service.read(kwh.pk, t1, t1 + 10, 10)
    assert first == pytest.approx(since_import, abs=1e-3)
    assert second == pytest.approx(since_import + 0.01, abs=1e-3)
    assert phpfina.read(feed_dir, kwh.pk, END, END, 10) == [[END * 1000, backup.KWH_TOTAL]]
    slot = t1 // 60 * 60
    assert service.read(outside.pk, slot, slot, 60) == [[slot * 1000, 7.25]]
    assert Feed.objects.count() == 3  # nothing auto-created: the inputs were known


def test_phptimeseries_points_keep_their_slots(archive, feed_dir, site, redis_client):
    run(archive)
    outside = feed("emonth", "outside")
    meta = phpfina.read_meta(feed_dir, outside.pk)
    assert meta.start_time == (END - 3600) // 60 * 60
    data = np.fromfile(feed_dir / f"{outside.pk}.dat", "<f4")
    assert len(data) == 61
    assert data[10] == pytest.approx(5.0)  # 7 s late: still its minute
    assert np.isnan(data[20])  # missing in the source: a gap, not a made-up value
    assert data[60] == pytest.approx(10.0)


def hostile(
    name: str, kind: bytes = tarfile.REGTYPE, link: str = "", size: int = 4
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = size if kind == tarfile.REGTYPE else 0
    return info


def test_archive_members_cannot_escape_and_links_are_refused(
    tmp_path, emoncms_files, feed_dir, site, redis_client
):
    archive = backup.make_archive(emoncms_files, tmp_path / "evil.tar.gz", extra=[
        hostile("../../escaped.sql"),
        hostile("/tmp/absolute/phpfina/7.dat"),
        hostile("phpfina/../../../up/phpfina/8.dat"),
        hostile("phpfina/9.dat", tarfile.SYMTYPE, link="/etc/passwd"),
        hostile("phpfina/9.meta", tarfile.LNKTYPE, link="emoncms.sql"),
    ])  # fmt: skip
    out = run(archive)
    for name in ("../../escaped.sql", "/tmp/absolute/phpfina/7.dat",
                 "phpfina/../../../up/phpfina/8.dat"):  # fmt: skip
        assert f"archive member {name!r} refused: path outside the archive" in out
    assert "archive member 'phpfina/9.dat' refused: not a regular file" in out
    assert "archive member 'phpfina/9.meta' refused: not a regular file" in out
    assert not (tmp_path.parent / "escaped.sql").exists()
    assert not Path("/tmp/absolute").exists()
    assert not list(tmp_path.rglob("escaped.sql")) and not list(tmp_path.rglob("up"))
    assert Feed.objects.count() == 3  # the real site is still imported


def test_data_over_the_bound_is_refused(archive, feed_dir, site):
    with pytest.raises(CommandError, match="more than 1073 bytes of data"):
        run(archive, "--max-gb", "0.000001")
    assert not Feed.objects.exists() and not list(feed_dir.glob(".emoncms-import-*"))


def test_a_file_that_is_not_a_backup_is_refused(tmp_path, feed_dir, site):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    with pytest.raises(CommandError, match="not a readable .tar.gz backup"):
        run(junk)
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(CommandError, match="holds no emoncms.sql"):
        run(empty)


# --- a running emoncms over HTTP -------------------------------------------------------------------
#
# A real emoncms needs PHP, Apache, MariaDB and Redis set up as an emonSD image does: far more
# than CI can run per test. This stand-in answers the five API calls the import makes with
# the JSON shapes and raw file bytes emoncms's input_controller/feed_controller return
# (list.json rows are the table rows; getmeta.json is PHPFina::get_meta; export.json is the
# engine file from `start`), served from the same files as the backup.


class EmoncmsStandIn(BaseHTTPRequestHandler):
    files: Path
    apikey = "0123456789abcdef0123456789abcdef"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if self.headers.get("Authorization") != f"Bearer {self.apikey}":
            return self._send(b'{"success":false,"message":"Username or password empty"}')
        columns_in = [
            "id",
            "userid",
            "nodeid",
            "name",
            "description",
            "processList",
            "time",
            "value",
        ]
        columns_feeds = ["id", "name", "userid", "tag", "time", "value", "datatype", "public",
                         "size", "engine", "server", "processList", "unit"]  # fmt: skip
        fid = query.get("id", "")
        if url.path == "/emoncms/input/list.json":
            body = json.dumps([dict(zip(columns_in, r, strict=True)) for r in backup.INPUTS])
        elif url.path == "/emoncms/feed/list.json":
            # emoncms answers numbers in text for some fields: the import must take both
            rows = [
                {**dict(zip(columns_feeds, r, strict=True)), "engine": str(r[9])}
                for r in backup.FEEDS
            ]
            body = json.dumps(rows)
        elif url.path == "/emoncms/feed/getmeta.json":
            meta = phpfina.unpack_meta((self.files / "phpfina" / f"{fid}.meta").read_bytes())
            body = json.dumps(
                {"id": int(fid), "interval": meta.interval, "start_time": meta.start_time}
            )
        elif url.path == "/emoncms/feed/export.json":
            path = self.files / "phpfina" / f"{fid}.dat"
            path = path if path.exists() else self.files / "phptimeseries" / f"feed_{fid}.MYD"
            return self._send(path.read_bytes()[int(query.get("start", 0)) :])
        else:
            body = "false"
        self._send(body.encode())

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def live_emoncms(emoncms_files):
    handler = type("Handler", (EmoncmsStandIn,), {"files": emoncms_files})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/emoncms"
    server.shutdown()
    server.server_close()


def test_a_running_emoncms_imports_the_same_as_its_backup(
    live_emoncms, tmp_path, feed_dir, emoncms_files, site, redis_client
):
    key_file = tmp_path / "apikey"
    key_file.write_text(EmoncmsStandIn.apikey + "\n")
    out = run("--url", live_emoncms, "--apikey-file", key_file)
    assert "feeds: 3 imported, 0 already here; inputs: 5 created" in out
    assert_site_imported(out, feed_dir, emoncms_files, site)
    assert service.last_value(feed("emontx1", "use_kwh").pk) == (END, backup.KWH_TOTAL)
    again = run("--url", live_emoncms, "--apikey-file", key_file)
    assert (
        "feeds: 0 imported, 3 already here; inputs: 0 created, 0 adopted, 5 already here" in again
    )


def test_a_wrong_key_is_a_clear_error(live_emoncms, tmp_path, feed_dir, site, monkeypatch):
    monkeypatch.setenv("EMONCMS_APIKEY", "f" * 32)
    with pytest.raises(CommandError, match="is the key a read key"):
        run("--url", live_emoncms)
    monkeypatch.delenv("EMONCMS_APIKEY")
    with pytest.raises(CommandError, match="needs a read API key"):
        run("--url", live_emoncms)


def test_a_second_run_keeps_process_lists_corrected_by_hand(archive, feed_dir, site, redis_client):
    run(archive)
    vrms = sensor("emontx1", "vrms")
    fixed = [
        {"process": "scale", "arg": 0.5},
        {"process": "log_to_feed", "feed": feed("emontx1", "power1").pk},
    ]
    vrms.processes = fixed
    vrms.save()
    run(archive)
    assert sensor("emontx1", "vrms").processes == fixed


def test_an_input_posted_here_before_the_import_takes_emoncms_processes(
    archive, feed_dir, site, redis_client
):
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    post(key, "emontx1", (NOW - 60) // 10 * 10, {"power1": 100})
    drain_all()
    early = sensor("emontx1", "power1")
    assert early.auto_created
    out = run(archive)
    assert "inputs: 4 created, 1 adopted, 0 already here; nodes: 2 created" in out
    imported = Feed.objects.get(tag="emontx1", name="power1 (emoncms 1)")  # its name was taken
    adopted = sensor("emontx1", "power1")
    assert adopted.pk == early.pk and not adopted.auto_created
    assert adopted.processes[0] == {"process": "log_to_feed", "feed": imported.pk}


def test_importing_into_another_site_never_touches_this_sites_inputs(
    archive, feed_dir, site, redis_client
):
    """An outside tester imported the same backup into a second site under another source
    name: the first site's imported sensors lost their process lists and feeds ("adopted").
    Names are per site now (issue #26 item 5): the second site gets nodes of its own."""
    run(archive, "--site", site.slug)

    def of(where: Site) -> dict:
        return {
            (s.node.name, s.key): (s.name, s.feed_id, s.processes, s.auto_created)
            for s in Sensor.objects.select_related("node").filter(node__site=where)
        }

    before = of(site)
    other = Site.objects.create(name="Other", slug="other")
    out = run(archive, "--site", other.slug, "--source-name", "evil")
    assert of(site) == before  # nothing of the first site changed, nothing added to its nodes
    assert set(of(other)) == set(before)  # the same inputs, on the other site's own nodes
    assert "0 adopted" in out and "nodes: 3 created" in out, out


def test_an_imported_node_10_gets_radio_id_10_in_its_site_beside_another_sites_10(
    archive, feed_dir, site, redis_client
):
    """emoncms's node `10` is radio id 10 (emonhub `sendnames = 0` posts it so): the import
    keeps it, even where another site already has a node on radio id 10."""
    other = Site.objects.create(name="Other", slug="other")
    Node.objects.create(name="their emontx", node_id=10, site=other, key_prefix="x", key_hash="y")
    run(archive, "--site", site.slug)
    ours = Node.objects.get(site=site, name="10")
    assert ours.node_id == 10
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    now = (NOW - 60) // 10 * 10
    response = Client().generic(
        "POST", "/input/bulk.json?cb=1", zlib.compress(b"[[%d,10,42]]" % now),
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip
    assert response.content == b"ok"
    drain_all()
    assert {k: v for k, (_t, v) in node_state.last_values(ours.pk).items()} == {"1": 42.0}


def test_an_input_configured_by_hand_is_not_adopted(archive, feed_dir, site, redis_client):
    node = Node.objects.create(name="emontx1", site=site, protocol=Node.Protocol.EMONCMS)
    mine = Sensor.objects.create(node=node, key="power1", name="Mine", auto_created=False)
    out = run(archive, "--site", site.slug)
    assert (
        "emontx1:power1: the input power1 of 'emontx1' was already configured here (by hand or "
        "by another import); left as it is"
    ) in out, out
    mine.refresh_from_db()
    assert (mine.name, mine.processes, mine.feed_id) == ("Mine", [], None)


def test_imported_nodes_expect_readings_as_often_as_their_feeds(
    archive, feed_dir, site, redis_client
):
    """Issue #26 item 11: every imported node expected a reading each 10 s, so a 60 s emonTH
    was alarmed silent between every two of its readings. The expected interval is the
    node's busiest logged feed's (emonth logs to a 60 s feed; node 10 logs nothing: 60 s)."""
    from sensors.tasks import check_silent_nodes

    run(archive, "--site", site.slug)
    intervals = dict(Node.objects.values_list("name", "interval"))
    assert intervals == {"emontx1": 10, "emonth": 60, "10": 60}
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    t1 = (NOW - 60) // 10 * 10
    post(key, "emontx1", t1, {"power1": 100})
    post(key, "emonth", t1, {"external temperature": 7.25})
    drain_all()
    seen = max(node_state.all_last_seen().values())
    result = check_silent_nodes(now=seen + 100)  # 100 s on: one emonTH interval and a half
    flagged = set(result["raised"]) | set(result["waiting"])
    assert Node.objects.get(name="emonth").pk not in flagged
    assert Node.objects.get(name="emontx1").pk in flagged  # 10 s: silent after 30 s


def test_a_feed_dated_far_in_the_future_is_refused_naming_it(tmp_path, feed_dir, site):
    """A crafted PHPFina meta starting at 4000000000 (2096) was imported, and then every live
    point was refused as older than the file. Its data is refused with a line naming it."""
    folder = backup.write_site(tmp_path / "emoncms", NOW)
    (folder / "phpfina" / "1.meta").write_bytes(phpfina.pack_meta(10, 4_000_000_000))
    out = run(backup.make_archive(folder, tmp_path / "future.tar.gz"), "--site", site.slug)
    assert (
        "feed 1 emontx1:power1: data refused: its data starts at 4000000000, more than "
        "BMS_INGEST_MAX_FUTURE_S (900 s) after now"
    ) in out, out
    assert not Feed.objects.filter(tag="emontx1", name="power1").exists()
    assert Feed.objects.filter(tag="emontx1", name="use_kwh").exists()  # the rest comes in
