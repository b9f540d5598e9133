"""feed/list.json, aget.json, get.json and getmeta.json against emoncms's own Feed model
(Modules/feed/feed_model.php under php-cli with phpredis, its PHPFina engine reading the
file): the same feed and file give the same JSON here.

emoncms's engine writes the file (so its bytes are emoncms's), emoncms's Redis hash
`feed:<id>` holds the feed's fields as `load_feed_to_redis` puts them, with no time/value yet,
so emoncms computes the last time and value from the file (PHPFina::lastvalue), as after a
restart; its later answers come from that hash (see the test). Needs php-cli with phpredis and emoncms's source (EMONCMS_SRC); skips otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from feeds.models import Feed
from tests.feeds.test_emoncms_feed_api import get, keyed

pytestmark = pytest.mark.django_db
EMONCMS_SRC = Path(os.environ.get("EMONCMS_SRC", "/work/emoncms-src"))
T0 = 1_719_835_200
POINTS = [[T0 + 3, 18.25], [T0 + 61, 0.1], [T0 + 125, 19.3]]

PHP = r"""<?php
define('EMONCMS_EXEC', 1);  // emoncms's files refuse to run without it
class EmonLogger { function __construct($f) {} function __call($n, $a) {} }
chdir($argv[1]);  // emoncms requires its engines by paths relative to its root
require "Lib/enum.php";
require "Modules/feed/feed_model.php";
$redis = new Redis();
$redis->connect($argv[2], (int) $argv[3]);
$redis->select((int) $argv[4]);
$dir = $argv[5] . '/';
$id = (int) $argv[6];
$feed = new Feed(null, $redis, array('phpfina' => array('datadir' => $dir)));
$engine = $feed->EngineClass(5);  // emoncms's PHPFina, as its feed model loads it
$engine->create($id, array('interval' => 60));
foreach (json_decode($argv[7]) as $p) { $engine->post($id, $p[0], $p[1]); }
$redis->sAdd("user:feeds:" . $argv[8], $id);
$redis->hMSet("feed:$id", json_decode($argv[9], true));  // as load_feed_to_redis
echo json_encode(array('list' => $feed->get_user_feeds((int) $argv[8]), 'aget' => $feed->get($id),
    'name' => $feed->get_field($id, 'name'), 'public' => $feed->get_field($id, 'public'),
    'time' => $feed->get_field($id, 'time'), 'meta' => $feed->get_meta($id),
    'timevalue' => $feed->get_timevalue($id)));
"""


def _php(directory: Path, feed: Feed, userid: int) -> dict:
    if shutil.which("php") is None:
        pytest.skip("php-cli is not installed: emoncms's Feed model cannot run here")
    if not (EMONCMS_SRC / "Modules/feed/feed_model.php").exists():
        pytest.skip(f"emoncms's source is not at {EMONCMS_SRC} (set EMONCMS_SRC)")
    if "redis" not in subprocess.run(["php", "-m"], capture_output=True, text=True).stdout.split():
        pytest.skip("php-cli has no phpredis extension: emoncms's Redis paths cannot run")
    from urllib.parse import urlparse

    url = urlparse(settings.REDIS_URL)
    size = 3 * 4  # three 60 s slots from T0: what emoncms's update_feed_size would store
    fields = {"id": feed.id, "userid": userid, "name": feed.name, "tag": feed.tag,
              "public": int(feed.public), "size": size, "engine": 5, "processList": "",
              "unit": feed.unit}  # fmt: skip
    script = directory / "feed.php"
    script.write_text(PHP)
    run = subprocess.run(
        ["php", str(script), str(EMONCMS_SRC), url.hostname or "127.0.0.1",
         str(url.port or 6379), (url.path or "/0").lstrip("/") or "0", str(directory),
         str(feed.id), json.dumps(POINTS), str(userid), json.dumps(fields)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(run.stdout)


def test_feed_rows_fields_and_meta_answer_what_emoncms_s_feed_model_answers(viewer, feed_dir,
                                                                            redis_client):  # fmt: skip
    feed = Feed.objects.create(name="house temp", tag="emonth", unit="°C", interval=60)
    php = _php(feed_dir, feed, viewer.pk)
    client = keyed(viewer)
    (row,) = get(client, "/feed/list.json").json()
    # emoncms's first read takes the file's last value (PHPFina::lastvalue): the float32 exactly
    assert row == php["list"][0]
    assert list(row) == list(php["list"][0])  # the same key order

    # It then keeps it in its Redis hash, where phpredis writes a float with PHP's `precision`
    # (14 significant digits): its later answers are that rounding of the same float32. Ours
    # stay the float32 as stored (docs/MOVING_FROM_EMONCMS.md, "Where we differ").
    def as_emoncms_hash_keeps(body: dict) -> dict:
        return {**body, "value": float(f"{body['value']:.14g}")}

    assert as_emoncms_hash_keeps(get(client, "/feed/aget.json", id=feed.id).json()) == php["aget"]
    timevalue = get(client, "/feed/timevalue.json", id=feed.id).json()
    assert as_emoncms_hash_keeps(timevalue) == php["timevalue"]
    assert timevalue["time"] == T0 + 120  # the slot start, not T0 + 125
    for field in ("name", "public", "time"):
        assert get(client, "/feed/get.json", id=feed.id, field=field).json() == php[field]
    assert get(client, "/feed/getmeta.json", id=feed.id).json() == php["meta"]
