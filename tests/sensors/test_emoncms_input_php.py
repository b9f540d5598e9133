"""/input/list.json, /input/get and /input/getinputs.json against emoncms's own PHP: its Input
model (Modules/input/input_model.php, run under php-cli with the phpredis extension) answers
getlist, get_inputs_v2 and get_inputs from emoncms's Redis keys holding the same inputs, and
ours must answer the same JSON.

emoncms keeps an input as `input:<id>` {id, nodeid, name, description, processList} and its
last reading as `input:lastvalue:<id>` {time, value} (strings, as Redis holds everything), the
user's inputs in the set `user:inputs:<userid>`. Those keys are written here from our sensors
into the test's own Redis database, so only the shaping is compared, which is the point:
types, nulls, nesting and key order.

Needs php-cli with phpredis and emoncms's source (EMONCMS_SRC, default /work/emoncms-src);
skips with the reason where any is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from sensors import emoncms_inputs
from sensors.ingest import node_state
from sensors.models import Node, Sensor, Site
from tests.sensors.test_emoncms_input_api import T, get, keyed

pytestmark = pytest.mark.django_db
EMONCMS_SRC = Path(os.environ.get("EMONCMS_SRC", "/work/emoncms-src"))
INPUT_MODEL = EMONCMS_SRC / "Modules/input/input_model.php"

PHP = r"""<?php
define('EMONCMS_EXEC', 1);  // emoncms's files refuse to run without it
class EmonLogger { function __construct($f) {} function __call($n, $a) {} }
require $argv[1];
$redis = new Redis();
$redis->connect($argv[2], (int) $argv[3]);
$redis->select((int) $argv[4]);
$input = new Input(null, $redis, null);  // the Redis paths need neither MySQL nor feeds
echo json_encode(array('list' => $input->getlist(1), 'v2' => $input->get_inputs_v2(1),
                       'inputs' => $input->get_inputs(1)));
"""


def _php(tmp_path: Path) -> dict:
    if shutil.which("php") is None:
        pytest.skip("php-cli is not installed: emoncms's Input model cannot run here")
    if not INPUT_MODEL.exists():
        pytest.skip(f"emoncms's source is not at {EMONCMS_SRC} (set EMONCMS_SRC)")
    modules = subprocess.run(["php", "-m"], capture_output=True, text=True, check=True).stdout
    if "redis" not in modules.split():
        pytest.skip("php-cli has no phpredis extension: emoncms's Redis paths cannot run")
    from urllib.parse import urlparse

    url = urlparse(settings.REDIS_URL)
    script = tmp_path / "inputs.php"
    script.write_text(PHP)
    run = subprocess.run(
        ["php", str(script), str(INPUT_MODEL), url.hostname or "127.0.0.1", str(url.port or 6379),
         (url.path or "/0").lstrip("/") or "0"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(run.stdout)


def _as_emoncms_keeps_them(redis_client, sensors: list[Sensor]) -> None:
    """Our inputs written as emoncms's Redis keys for user 1."""
    for s in sensors:
        redis_client.sadd("user:inputs:1", s.pk)
        redis_client.hset(f"input:{s.pk}", mapping={
            "id": s.pk, "nodeid": s.node.name, "name": s.key, "description": s.name,
            "processList": emoncms_inputs.encode(s.processes)})  # fmt: skip
        last = node_state.last_values(s.node_id).get(s.key)
        if last is not None:
            redis_client.hset(f"input:lastvalue:{s.pk}", mapping={"time": last[0],
                                                                  "value": last[1]})  # fmt: skip


@pytest.fixture
def inputs(db, redis_client):
    site = Site.objects.create(name="Home", slug="home")
    node = Node(name="emontx", site=site)
    node.set_new_key()
    node.save()
    other = Node(name="emon.pi", site=site)
    other.set_new_key()
    other.save()
    made = [
        Sensor.objects.create(node=node, key="power1", name="Solar",
                              processes=[{"process": "scale", "arg": 0.5},
                                         {"process": "allowpositive"}]),
        Sensor.objects.create(node=node, key="temp"),  # never posted: nulls
        Sensor.objects.create(node=other, key="vrms", name="Mains"),
    ]  # fmt: skip
    redis_client.hset(node_state.last_key(node.pk), mapping={"power1": f"{T} 1520.5"})
    redis_client.hset(node_state.last_key(other.pk), mapping={"vrms": f"{T + 3} 241"})
    _as_emoncms_keeps_them(redis_client, made)
    return made


def test_list_get_and_getinputs_answer_what_emoncms_s_input_model_answers(viewer, inputs,
                                                                          tmp_path):  # fmt: skip
    php = _php(tmp_path)
    client = keyed(viewer)
    ours = get(client, "/input/list.json").json()
    # emoncms lists in its set's order; the rows themselves must be identical, keys in order
    assert sorted(ours, key=lambda r: r["id"]) == sorted(php["list"], key=lambda r: r["id"])
    assert [list(r) for r in ours] == [list(r) for r in php["list"]]
    assert get(client, "/input/get").json() == php["v2"]
    assert get(client, "/input/get/emon.pi/vrms").json() == php["v2"]["emon.pi"]["vrms"]
    assert get(client, "/input/getinputs.json").json() == php["inputs"]
