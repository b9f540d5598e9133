"""Switch-over continuity (issue #26 item 6): the import carries each input's last value and
time, so counter processes count the energy between emoncms's last reading and the first one
here, exactly as emoncms's own process_processlist.php would have counted it.

The backup is the backup module's archive around a dump the real MariaDB `mysqldump` wrote of
emoncms's `input` and `feeds` tables (tests/sensors/emoncms_mariadb.py): the input's last
value is X at time T; then a reading Y at T+10 is posted here as emonhub posts it."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from django.conf import settings

from feeds.processes.steps import DayClock
from feeds.store import phpfina, service
from sensors.emoncms_import import continuity
from sensors.ingest import node_state
from sensors.models import EmoncmsOrigin, GatewayKey, Node
from tests.sensors import emoncms_mariadb as mariadb
from tests.sensors import make_emoncms_backup as backup
from tests.sensors.test_import_emoncms_site import drain_all, run
from tests.wsgi_client import WsgiClient as Client

UNREACHABLE = mariadb.unreachable()

CLOCK = DayClock(settings.TIME_ZONE)
T = (int(time.time()) - 600) // 10 * 10 + 3  # emoncms's last reading: 3 s into a 10 s slot
if CLOCK.day(T)[0] != CLOCK.day(T + 10)[0]:
    T -= 60  # the two readings on one local day, as the kWh/d figure below assumes
SLOT = T // 10 * 10
DAY_START = CLOCK.day(T)[1]

# Meter readings as float32 holds them exactly (emoncms's input.value is a FLOAT column).
X_KWH, Y_KWH = 5000.25, 5000.375  # kwh_accumulator: +0.125 kWh in 10 s is 45 kW, under 60 kW
X_TOTAL, Y_TOTAL = 200.5, 200.75  # kwh_to_kwhd: +0.25 kWh today
X_POWER, Y_POWER = 1800.0, 3600.0  # power_to_kwh: 3600 W for the 10 s since T
FEED_TOTAL, FEED_TODAY, FEED_KWH = 1000.0, 3.5, 50.0  # the feeds' last values

# mariadb.INPUT_COLUMNS: id, userid, nodeid, name, description, processList, time, value
INPUTS = [
    (1, 1, "meter", "import_kwh", "", "process__kwh_accumulator:11", T, X_KWH),
    (2, 1, "meter", "total_kwh", "", "23:12", T, X_TOTAL),
    (3, 1, "meter", "power", "", "1:13,4:14", T, X_POWER),
    # stale: its time is an hour before its feed's last point (emoncms with Redis on)
    (4, 1, "meter", "export_kwh", "", "64:15", T - 3600, 77.0),
    (5, 1, "meter", "never", "", "64:16", None, None),
]
# mariadb.FEED_COLUMNS: id, name, userid, tag, time, value, datatype, public, size, engine,
# server, processList, unit
FEEDS = [(i, name, 1, "meter", 0, 0, 1, 0, 0, 5, 0, "", unit) for i, name, unit in [
    (11, "import_total", "kWh"), (12, "kwhd", "kWh"), (13, "power", "W"), (14, "use_kwh", "kWh"),
    (15, "export_total", "kWh"), (16, "never_total", "kWh"),
]]  # fmt: skip


def write_feed(folder, feed_id: int, interval: int, last_slot: int, last: float, n: int = 50):
    data = np.linspace(last - 1, last, n).astype("<f4")
    (folder / "phpfina" / f"{feed_id}.meta").write_bytes(
        phpfina.pack_meta(interval, last_slot - (n - 1) * interval)
    )
    (folder / "phpfina" / f"{feed_id}.dat").write_bytes(data.tobytes())


@pytest.fixture
def archive(tmp_path):
    if UNREACHABLE:
        pytest.skip(f"needs MariaDB: {UNREACHABLE}")
    with mariadb.scratch_database(INPUTS, FEEDS) as database:
        sql = mariadb.dump(database)  # as emoncms's backup module runs it: no options
    folder = tmp_path / "emoncms"
    (folder / "phpfina").mkdir(parents=True)
    (folder / "phptimeseries").mkdir()
    (folder / "emoncms.sql").write_bytes(sql)
    for feed_id, last in ((11, FEED_TOTAL), (13, X_POWER), (14, FEED_KWH), (15, 300.0), (16, 9.0)):
        write_feed(folder, feed_id, 10, SLOT, last)
    write_feed(folder, 12, 86400, DAY_START // 86400 * 86400, FEED_TODAY, n=3)
    return backup.make_archive(folder, tmp_path / "emoncms-backup.tar.gz")


def ours(emoncms_id: int) -> int:
    return EmoncmsOrigin.objects.get(kind="feed", emoncms_id=emoncms_id).feed_id


def value_at(feed_id: int, t: int, interval: int = 10) -> float | None:
    slot = t // interval * interval
    [[_, value]] = service.read(feed_id, slot, slot, interval)
    return value


@pytest.mark.django_db
def test_counters_count_from_emoncms_last_reading(archive, feed_dir, site, redis_client):
    out = run(archive, "--site", site.slug)
    assert "inputs carrying on from emoncms's last reading: 4" in out, out
    meter = Node.objects.get(site=site, name="meter")
    # the input's last value and time, as emoncms showed them
    assert node_state.last_values(meter.pk)["import_kwh"] == (T, X_KWH)
    assert "never" not in node_state.last_values(meter.pk)
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    values = {"import_kwh": Y_KWH, "total_kwh": Y_TOTAL, "power": Y_POWER}
    response = Client().get(
        "/input/post.json",
        {"node": "meter", "time": T + 10, "fulljson": json.dumps(values)},
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 200, response.content
    drain_all()
    service.commit_all(now=T + 20)
    # emoncms's kwh_accumulator: the feed's last value + (Y - X), the rise being under 60 kW
    assert value_at(ours(11), T + 10) == np.float32(FEED_TOTAL + (Y_KWH - X_KWH))
    # emoncms's kwh_to_kwhd: today's figure + (Y - X), same local day
    day_slot = DAY_START // 86400 * 86400
    assert value_at(ours(12), day_slot, 86400) == np.float32(FEED_TODAY + (Y_TOTAL - X_TOTAL))
    # emoncms's power_to_kwh: Y watts over the 10 s since its last post at T (not since the
    # start of T's slot, 13 s)
    assert value_at(ours(14), T + 10) == np.float32(FEED_KWH + Y_POWER * 10 / 3_600_000)


@pytest.mark.django_db
def test_a_stale_input_value_never_counts_twice(archive, feed_dir, site, redis_client):
    """The dump's export_kwh is an hour older than its feed's last point: seeding it would add
    again the hour the feed already holds, so the step starts afresh and the report says so."""
    out = run(archive, "--site", site.slug)
    assert (
        "input 4 meter:export_kwh: kwh_accumulator starts afresh, not from emoncms's last "
        f"reading (at {T - 3600}" in out
    ), out
    meter = Node.objects.get(site=site, name="meter")
    runner_state = redis_client.hgetall(f"{service.get_buffer().prefix}proc:{meter.pk}:export_kwh")
    assert runner_state == {}


@pytest.mark.django_db
def test_a_second_import_never_overwrites_state_counted_here(archive, feed_dir, site, redis_client):
    run(archive, "--site", site.slug)
    meter = Node.objects.get(site=site, name="meter")
    state_key = f"{service.get_buffer().prefix}proc:{meter.pk}:import_kwh"
    [(field, _)] = redis_client.hgetall(state_key).items()
    counted_here = json.dumps({"input": 6000.0, "total": 1500.0, "t": T + 500})
    redis_client.hset(state_key, field, counted_here)
    continuity.carry_over(
        service.get_buffer(), settings.TIME_ZONE, meter.pk, "import_kwh",
        [{"process": "kwh_accumulator", "feed": ours(11)}], T, X_KWH,
    )  # fmt: skip
    assert redis_client.hget(state_key, field).decode() == counted_here


def test_steps_after_an_unknown_value_are_left_to_their_own_start():
    clock = DayClock("UTC")
    steps = [
        {"process": "scale", "arg": 0.001},
        {"process": "kwh_accumulator", "feed": 1},
        {"process": "add_input", "input": 9},
        {"process": "kwh_to_kwhd", "feed": 2},
    ]
    states, left = continuity.seed_states(steps, 1000, 5_000_000.0, {1: (990, 12.0)}, clock)
    assert states == {"1:kwh_accumulator:1": {"input": 5000.0, "total": 12.0, "t": 1000}}
    assert left == ["kwh_to_kwhd"]


def test_each_counting_step_is_seeded_as_emoncms_remembers_it():
    clock = DayClock("UTC")
    t = 86400 * 20_000 + 3600  # 01:00 UTC
    feeds = {1: (t - 3, 40.0), 2: (t - 3, 7.0), 3: (86400 * 20_000, 2.5), 4: (86400 * 19_999, 9.0)}
    cases = [
        ({"process": "wh_accumulator", "feed": 1}, 1234.0,
         {"input": 1234.0, "total": 40.0}),
        ({"process": "power_to_kwh", "feed": 2}, 500.0, {"kwh": 7.0}),
        ({"process": "power_to_kwhd", "feed": 3}, 500.0,  # today's figure carries on
         {"kwh": 2.5, "day": clock.day(t)[0]}),
        ({"process": "kwh_to_kwhd", "feed": 4}, 100.0,  # yesterday's point: today starts at 0
         {"kwh": 100.0, "day": clock.day(t)[0], "total": 0.0}),
        ({"process": "pulse_diff", "feed": 5}, -1.0, {"count": 4294967295.0}),  # signed2unsigned
        ({"process": "ratechange", "feed": 6}, 3.0, {"input": 3.0}),
    ]  # fmt: skip
    for step, x, expected in cases:
        states, left = continuity.seed_states([step], t, x, feeds, clock)
        assert states == {f"0:{step['process']}:{step['feed']}": {**expected, "t": t}}, step
        assert left == []


def test_a_counter_whose_feed_has_no_value_is_left_to_its_own_start():
    states, left = continuity.seed_states(
        [{"process": "kwh_accumulator", "feed": 1}], 1000, 5.0, {}, DayClock("UTC")
    )
    assert (states, left) == ({}, ["kwh_accumulator"])
