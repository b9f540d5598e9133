"""Differential test against emoncms itself (issue #26, "Done when"): one stream of traffic,
sent to a running emoncms (its PHP code, MariaDB, its own Redis: tests/emoncms_php.py) and to
our live server with a real drain worker, through /input/post and /input/bulk, with the same
process lists; the PHPFina files both write are then compared slot by slot.

The stream has what a real site sends and a clean test does not: out-of-order rows, a row sent
twice, a row dated in the future (then rows late against it), null, numeric text and other
text, and a process list that reads another input of the same post (`add_input`), feeding
`power_to_kwh`, beside `kwh_accumulator`, `wh_accumulator` and `pulse_diff` on counters.

Feeds of stateless steps agree slot for slot; the one documented exception is text that is not
a number (docs/INGEST.md: emoncms stores 0, we skip it). `power_to_kwh` agrees slot for slot
too, through a bulk row six minutes ahead and the late rows after it: both move the step's
clock back to a late reading and count on from it, and both files draw the join line before the
future row as it arrived. The counter steps agree up to the first late reading
(but for one counter's first increment, below); from there each system follows its own
documented rule for a reading at or before the step's last one (docs/FEEDS.md, "Differences
found by running emoncms"): emoncms moves the step's clock back to it and writes there, we keep
the clock and write nothing; and a counter's first increment is judged against the empty feed's
time (1970) by emoncms, against the counter's last reading by us. The test holds each system's
files to its rule (`Rule`, written from FEEDS.md, not from our code) and holds that the rules
are all that separates them.
Skips with the reason when php or the emoncms checkout (EMONCMS_DIR) is missing.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import urllib.parse
import urllib.request

import pytest
from django.conf import settings

from core.redis import get_redis
from feeds.models import Feed
from feeds.store import phpfina, service
from sensors import cache
from sensors.ingest import stream
from sensors.models import Sensor
from tests.emoncms_php import Emoncms, skip_reason
from tests.live_http import KioskServer
from tests.sensors.conftest import make_node
from tests.wait import wait_for

WHY_NOT = skip_reason()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]

NODE = "10"  # emoncms's node id; ours is the node with radio id 10
INTERVAL = 10
INPUTS = ("power1", "ref", "meter", "whmeter", "whjump", "pulses", "temp")
# Process lists by input: (emoncms function, argument kind, argument name).
PROCESSES = {
    "power1": [("log_to_feed", "feed", "power1"), ("add_input", "input", "ref"),
               ("log_to_feed", "feed", "sum"), ("power_to_kwh", "feed", "kwh")],
    "ref": [("log_to_feed", "feed", "ref")],
    "meter": [("log_to_feed", "feed", "meter"), ("kwh_accumulator", "feed", "meter_total")],
    "whmeter": [("wh_accumulator", "feed", "wh_total")],
    "whjump": [("wh_accumulator", "feed", "whjump_total")],
    "pulses": [("pulse_diff", "feed", "pulse_count"), ("log_to_feed", "feed", "pulse_diff")],
    "temp": [("log_to_feed", "feed", "temp")],
}  # fmt: skip
FEEDS = [arg for steps in PROCESSES.values() for _, kind, arg in steps if kind == "feed"]
STATEFUL = ("kwh", "meter_total", "wh_total", "whjump_total", "pulse_count", "pulse_diff")
SAME_RULE = ("kwh",)  # a late reading moves the step's clock back here as in emoncms
# Written with "join" padding by both systems (a gap is a straight line, not missing slots).
JOINED = ("kwh", "meter_total", "wh_total", "whjump_total")


def traffic(t0: int, now: int) -> list[tuple[str, list[tuple[int, dict]]]]:
    """The stream in the order sent: (path, [(time, values), ...]); t0 is slot-aligned, 20
    minutes before now. `input/post` sends `fulljson`, `input/post?json` the `json` form."""
    return [
        ("input/post", [(t0, {"power1": 100, "ref": 50, "meter": 100.0, "whmeter": 1000,
                              "whjump": 1000, "pulses": 500, "temp": 20.5})]),
        # whjump: 500 Wh in 10 s (180 kW), the first increment after the counter was primed.
        ("input/bulk", [(t0 + 10, {"power1": 200, "ref": "23.5", "meter": 100.1, "whmeter": 1010,
                                   "whjump": 1500, "pulses": 510, "temp": "21.25"}),
                        (t0 + 20, {"power1": 300, "ref": 10, "meter": 100.2, "whmeter": 1020,
                                   "whjump": 1510, "pulses": 520, "temp": 21.0})]),
        # The same row again (emonhub resends a batch it got no `ok` for).
        ("input/bulk", [(t0 + 20, {"power1": 300, "ref": 10, "meter": 100.2, "whmeter": 1020,
                                   "whjump": 1510, "pulses": 520, "temp": 21.0})]),
        # Out of order: 50 before 30 and 40.
        ("input/post", [(t0 + 50, {"power1": 500, "ref": 20, "meter": 100.25, "whmeter": 1050,
                                   "pulses": 550, "temp": 19.5})]),
        ("input/bulk", [(t0 + 30, {"power1": 400, "ref": 15, "meter": 100.22, "whmeter": 1030,
                                   "pulses": 530, "temp": 20.0}),
                        (t0 + 40, {"power1": 450, "ref": 15, "meter": 100.23, "whmeter": 1040,
                                   "pulses": 540, "temp": None})]),
        ("input/post", [(t0 + 60, {"power1": 600, "ref": None, "meter": 100.3, "whmeter": 1060,
                                   "pulses": 560, "temp": "abc"})]),
        # A bulk row six minutes ahead of the servers' clock (both accept it), then rows in
        # time order again: late against it.
        ("input/bulk", [(now + 360, {"power1": 700, "ref": 30, "meter": 100.4, "whmeter": 1100,
                                     "pulses": 600, "temp": 22.0})]),
        ("input/post", [(t0 + 70, {"power1": 800, "ref": 40, "meter": 100.5, "whmeter": 1070,
                                   "pulses": 570, "temp": 22.5})]),
        ("input/bulk", [(t0 + 80, {"power1": 900, "ref": 45, "meter": 100.6, "whmeter": 1080,
                                   "pulses": 580, "temp": 23.0}),
                        (t0 + 90, {"power1": 1000, "ref": 5, "meter": 100.7, "whmeter": 1090,
                                   "pulses": 590, "temp": 23.5})]),
        # power1 alone: add_input reads ref's value as last posted (t0 + 90).
        ("input/post", [(t0 + 100, {"power1": 1100})]),
        # emoncms's older `json=` form, where null is the bare word.
        ("input/post?json", [(t0 + 110, {"power1": 1200, "ref": None, "temp": 24.0})]),
    ]  # fmt: skip


def form(path: str, rows: list[tuple[int, dict]]) -> dict:
    if path == "input/post":
        [(t, values)] = rows
        return {"node": NODE, "fulljson": json.dumps(values), "time": t}
    if path == "input/post?json":
        [(t, values)] = rows
        pairs = ",".join(f"{k}:{'null' if v is None else v}" for k, v in values.items())
        return {"node": NODE, "json": "{" + pairs + "}", "time": t}
    return {"data": json.dumps([[t, int(NODE), values] for t, values in rows]), "time": 0}


def number(value) -> float | None:
    """A value as both systems read it from /input/*: null 0, numeric text its number; None
    for other text (emoncms: 0, here: skipped; only `temp` carries it)."""
    if value is None:
        return 0.0
    try:
        return float(value)
    except ValueError:
        return None


# --- the rules of docs/FEEDS.md for a stateful step, emoncms's and ours ------------------------


class Rule:
    """One stateful step run over the stream by the rule FEEDS.md gives it. `clock_back`:
    emoncms's rule (a reading at or before the step's last one moves the step's clock back to
    it and writes there); without it, ours (the clock stays, nothing is written)."""

    def __init__(self, clock_back: bool) -> None:
        self.clock_back = clock_back
        self.writes: list[tuple[int, float]] = []

    def power_to_kwh(self, readings: list[tuple[int, float]]) -> list[tuple[int, float]]:
        last = None  # (time, kWh): the feed's last point, the step's clock
        for t, watts in readings:
            if last is None:  # an empty feed: start at 0, now
                last = (t, 0.0)
                self.writes.append(last)
                continue
            elapsed = t - last[0]
            kwh = last[1] + (watts * elapsed / 3_600_000 if 0 < elapsed < 7200 else 0.0)
            if elapsed > 0 or self.clock_back:
                last = (t, kwh)
                self.writes.append(last)
        return self.writes

    def accumulator(self, readings: list[tuple[int, float]], to_watts: float) -> list:
        """kwh_accumulator (to_watts 3.6e6) and wh_accumulator (3600): increments of a counter,
        a fall or a jump over 60 kW not counted."""
        counter = None  # (time, count) of the last reading the step took
        last = None  # the feed's last point; emoncms reads an empty feed as (0, 0)
        for t, count in readings:
            if counter is None:  # the first reading only sets the counter
                counter = (t, count)
                continue
            if not self.clock_back and t <= counter[0]:
                continue
            at, total = last or (0, 0.0)
            if not self.clock_back:  # ours: the power is judged from the counter's last time
                at = counter[0]
            increment = count - counter[1]
            if t > at and increment > 0 and increment * to_watts / (t - at) < 60_000:
                total += increment
            last = (t, total)
            self.writes.append(last)
            counter = (t, count)
        return self.writes

    def pulse_diff(self, readings: list[tuple[int, float]]) -> tuple[list, list]:
        """(writes of the count feed, pulses passed on per reading): a fall is a restart."""
        last = None
        passed = []
        for t, count in readings:
            if last is not None and not self.clock_back and t <= last[0]:
                passed.append((t, 0.0))
                continue
            if last is None:
                pulses = 0.0
            else:
                pulses = count - last[1] if count >= last[1] else count
            last = (t, count)
            self.writes.append(last)
            passed.append((t, pulses))
        return self.writes, passed


def rule_writes(rows: list[tuple[int, dict]], clock_back: bool) -> dict[str, list]:
    """Per stateful feed, the points its rule writes, in order. power_to_kwh moves its clock
    back in both systems (FEEDS.md); `clock_back` chooses the counters' rule."""

    def of(key: str) -> list[tuple[int, float]]:
        return [(t, number(v[key])) for t, v in rows if key in v]

    # power_to_kwh takes power1 + ref (add_input): ref as last posted, this post's own first.
    ref = 0.0
    readings = []
    for t, v in rows:
        ref = number(v["ref"]) if "ref" in v else ref
        if "power1" in v:
            readings.append((t, number(v["power1"]) + ref))
    count_writes, passed = Rule(clock_back).pulse_diff(of("pulses"))
    return {
        "kwh": Rule(clock_back=True).power_to_kwh(readings),
        "meter_total": Rule(clock_back).accumulator(of("meter"), 3_600_000),
        "wh_total": Rule(clock_back).accumulator(of("whmeter"), 3600),
        "whjump_total": Rule(clock_back).accumulator(of("whjump"), 3600),
        "pulse_count": count_writes,
        "pulse_diff": passed,
    }


# --- files ---------------------------------------------------------------------------------


def slots(directory, feed_id: int) -> dict[int, float | None]:
    """Every slot of a PHPFina feed by its time; None for NaN (missing)."""
    meta, data = phpfina.open_feed(directory, feed_id)
    if meta is None:
        return {}
    return {
        meta.start_time + i * meta.interval: None if math.isnan(v) else float(v)
        for i, v in enumerate(data.tolist())
    }


def differences(ours: dict, theirs: dict) -> dict[int, tuple]:
    """Slot time -> (ours, emoncms's) where they differ; a slot one file lacks reads as missing."""
    return {
        t: (ours.get(t), theirs.get(t))
        for t in sorted(set(ours) | set(theirs))
        if ours.get(t) != theirs.get(t)
    }


def render(writes: list[tuple[int, float]], join: bool) -> dict[int, float | None]:
    """The PHPFina file the writes make, by the rules of docs/FEEDS.md: the first write sets
    the start; a write inside the file overwrites its slot; one past the end pads the gap with
    missing slots, or with join padding with the straight line from the file's last slot."""
    values: list[float | None] = []
    start = None
    for t, v in writes:
        start = t - t % INTERVAL if start is None else start
        slot = (t - start) // INTERVAL
        if slot < len(values):
            values[slot] = v
            continue
        gap = slot - len(values)
        last = values[-1] if values else None
        step = (v - last) / (gap + 1) if join and last is not None else None
        values += [None if step is None else last + step * (k + 1) for k in range(gap)]
        values.append(v)
    return {start + i * INTERVAL: v for i, v in enumerate(values)} if start is not None else {}


def departures(stored: dict, wanted: dict) -> list:
    """Slots where a file is not what its rule makes (float32 against double: 1e-6)."""
    return [
        (t, stored.get(t), wanted.get(t))
        for t in sorted(set(stored) | set(wanted))
        if (stored.get(t) is None) != (wanted.get(t) is None)
        or stored.get(t) is not None
        and not math.isclose(stored[t], wanted[t], rel_tol=1e-6, abs_tol=1e-9)
    ]


# --- the two systems -----------------------------------------------------------------------


def send(base_url: str, apikey: str, path: str, fields: dict) -> str:
    data = urllib.parse.urlencode({**fields, "apikey": apikey}).encode()
    with urllib.request.urlopen(f"{base_url}/{path}", data=data, timeout=30) as response:
        return response.read().decode()


@pytest.fixture
def emoncms():
    server = Emoncms()
    try:
        server.start()
        yield server
    finally:  # a start that failed half way leaves no server, Redis or database behind
        server.stop()


@pytest.fixture
def ours(transactional_db, celery_worker, redis_client):
    cache.clear_all()
    shutil.rmtree(settings.BMS_FEED_DIR, ignore_errors=True)
    settings.BMS_FEED_DIR.mkdir(parents=True, exist_ok=True)
    node, key = make_node("emontx1", node_id=int(NODE), interval=INTERVAL)
    server = KioskServer()
    server.start()
    yield node, key, server
    server.stop()
    cache.clear_all()


def configure(emoncms: Emoncms, node, key: str, server: KioskServer, t0: int) -> dict:
    """The same inputs, feeds and process lists on both; {feed name: (our id, emoncms's id)}."""
    # An input exists before its process list, as in emoncms (an input is created by its first
    # post, which runs no list there): one post of zeros ten minutes before the stream.
    first = form("input/post", [(t0 - 600, dict.fromkeys(INPUTS, 0))])
    assert send(emoncms.url, emoncms.apikey, "input/post", first) == '{"success": true}'
    assert json.loads(send(server.url, key, "input/post", first)) == {"success": True}
    wait_for(lambda: Sensor.objects.filter(node=node).count() == len(INPUTS), 30,
             "our inputs to be created")  # fmt: skip

    feeds = {}
    for name in FEEDS:
        mine = Feed.objects.create(name=name, tag="diff", interval=INTERVAL)
        feeds[name] = (mine.pk, emoncms.create_feed(name, INTERVAL))
    their_inputs = emoncms.inputs()
    our_inputs = {s.key: s for s in Sensor.objects.filter(node=node)}
    for name, steps in PROCESSES.items():
        theirs, mine = [], []
        for fn, kind, arg in steps:
            if kind == "feed":
                theirs.append((fn, [feeds[arg][1]]))
                mine.append({"process": fn, "feed": feeds[arg][0]})
            else:
                theirs.append((fn, [their_inputs[(NODE, arg)]]))
                mine.append({"process": fn, "input": our_inputs[arg].pk})
        emoncms.set_processlist(their_inputs[(NODE, name)], theirs)
        sensor = our_inputs[name]
        sensor.processes = mine
        sensor.full_clean()
        sensor.save()
    return feeds


def test_one_stream_through_emoncms_and_us_gives_the_same_phpfina_files(emoncms, ours):
    node, key, server = ours
    now = int(time.time())
    t0 = (now // INTERVAL) * INTERVAL - 1200
    feeds = configure(emoncms, node, key, server, t0)
    stream_of_requests = traffic(t0, now)
    # Sent as fast as the servers answer: our drain takes whatever requests wait in the node's
    # stream in one chunk, and the result must not depend on how they were grouped.
    for kind, request_rows in stream_of_requests:
        path = kind.partition("?")[0]
        theirs = send(emoncms.url, emoncms.apikey, path, form(kind, request_rows))
        mine = send(server.url, key, path, form(kind, request_rows))
        assert theirs in ("ok", '{"success": true}'), (path, request_rows, theirs)
        assert mine in ("ok", '{"success":true}', '{"success": true}'), (path, request_rows, mine)
    redis = get_redis()
    wait_for(lambda: redis.xlen(stream.stream_key(node.pk)) == 0, 60,
             "the drain worker to process every request")  # fmt: skip
    service.commit_all(sync=True)

    files = {
        name: (slots(service.feed_dir(mine), mine), slots(emoncms.datadir, theirs))
        for name, (mine, theirs) in feeds.items()
    }
    rows = [row for _, in_request in stream_of_requests for row in in_request]
    first_late = t0 + 30  # the first row at or before an earlier-sent one
    compared = sum(len(set(a) | set(b)) for a, b in files.values())
    assert compared > 1000

    # Stateless steps: the same file, but for text that is not a number (emoncms 0, we skip).
    for name in ("power1", "sum", "ref", "meter", "temp"):
        ours_, theirs_ = files[name]
        found = differences(ours_, theirs_)
        text = {t - t % INTERVAL for t, v in rows if "abc" in json.dumps(v.get(name))}
        assert found == {t: (None, 0.0) for t in text}, (name, found)
    assert text  # the stream did carry such a value for temp
    for t, values in rows:  # and the files hold the stream (not two empty files alike)
        for name in ("power1", "ref", "meter", "temp"):
            if name in values and number(values[name]) is not None:
                slot = t - t % INTERVAL
                assert files[name][0][slot] == pytest.approx(number(values[name]), rel=1e-6), name

    # Stateful steps: each system's file is what its rule makes, and where the two rules make
    # the same slot the files hold the same float32.
    ours_rules, their_rules = rule_writes(rows, False), rule_writes(rows, True)
    future_slot = now + 360 - (now + 360) % INTERVAL
    for name in STATEFUL:
        ours_, theirs_ = files[name]
        join = name in JOINED
        ours_wanted, their_wanted = render(ours_rules[name], join), render(their_rules[name], join)
        assert departures(theirs_, their_wanted) == [], (name, "emoncms")
        if name not in SAME_RULE:
            assert departures(ours_, ours_wanted) == [], (name, "ours")
        rules_differ = {t for t, *_ in departures(ours_wanted, their_wanted)}
        if name in SAME_RULE:
            # The same rule, and the same file: every point the step wrote is the same float32,
            # and the join padding before the future row too (drawn as it arrived, from
            # t0+60, and overwritten by the late rows), but for the last bit of a float32 in
            # the line (emoncms adds a step per slot, we interpolate each).
            assert rules_differ == set(), name
            assert departures(ours_, theirs_) == [], name
            written = {t - t % INTERVAL for t, _v in ours_rules[name]}
            assert {t: ours_[t] for t in written} == {t: theirs_[t] for t in written}, name
            assert set(differences(ours_, theirs_)) <= set(range(t0 + 120, future_slot, 10))
            continue
        assert rules_differ, name  # the stream does exercise the difference
        agree = {t: p for t, p in differences(ours_, theirs_).items() if t not in rules_differ}
        assert agree == {}, (name, agree)
        # Up to the first late reading the rules agree too (bar whjump's first increment).
        assert min(rules_differ) >= first_late or name == "whjump_total", (name, rules_differ)
    # The kWh counted on after the future row: the late rows' slots rise again from its total.
    kwh_ours, _ = files["kwh"]
    assert kwh_ours[t0 + 90] > kwh_ours[t0 + 80] > kwh_ours[t0 + 70] >= kwh_ours[future_slot] > 0
    assert files["whjump_total"][0][t0 + 10] == 0.0  # ours: a 180 kW jump is a spike
    assert files["whjump_total"][1][t0 + 10] == 500.0  # emoncms: counted against 1970
