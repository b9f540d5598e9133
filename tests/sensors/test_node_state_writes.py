"""NodeStateWrites: a drain pass's node state (seen, last values, pulse counters, the capped
and silent flags) in one script call (#29), with the same keys and values the pipeline of
five to seven commands a node wrote."""

from __future__ import annotations

import pytest
import redis

from alarms.lifecycle import raise_alarm
from alarms.models import Alarm
from sensors import conversions as cv
from sensors.ingest import input_budget
from sensors.ingest import node_state as state
from sensors.ingest.processing import PULSE_SAVE_S, NodeStateWrites, SensorSpec
from sensors.models import PulseCounterState, Sensor, Site
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000
CHUNK = 500  # the script's field/value pairs an HSET


def _last(n: int, t: int = T0) -> dict[str, tuple[int, float]]:
    return {f"in{i}": (t + i % 7, i / 3) for i in range(n)}


def _raw_last(last: dict[str, tuple[int, float]]) -> dict[bytes, bytes]:
    """What the pipeline's HSET wrote: "t value" with the value's repr."""
    return {k.encode(): f"{t} {v!r}".encode() for k, (t, v) in last.items()}


def _pulse_spec(sensor_id: int, key: str = "pulse") -> SensorSpec:
    return SensorSpec(sensor_id, key, cv.PULSE_KIND, {}, 1.0, 0.0, [], None, None)


def test_a_pass_of_many_nodes_is_one_script_call(redis_client, redis_trips):
    writes = NodeStateWrites()
    lasts = {node_id: _last(5, T0 + node_id) for node_id in range(1, 301)}
    for node_id, last in lasts.items():
        assert node_id not in writes
        writes.queue(node_id, T0 + 0.9, last, {}, [])
        assert node_id in writes
    assert len(writes) == 300
    redis_trips.clear()
    writes.flush()
    # One EVALSHA (and, the first time in this Redis, the NOSCRIPT answer's SCRIPT LOAD and
    # EVALSHA again): never a command a node.
    sent = [name for trip in redis_trips for name, *_ in trip]
    assert set(sent) <= {"EVALSHA", "SCRIPT"} and sent.count("EVALSHA") <= 2
    assert len(writes) == 0 and 1 not in writes
    assert redis_client.hgetall(state.SEEN_KEY) == {
        str(n).encode(): str(T0).encode() for n in lasts
    }
    for node_id, last in lasts.items():
        assert redis_client.hgetall(state.last_key(node_id)) == _raw_last(last)
        assert state.last_values(node_id) == last


@pytest.mark.parametrize("inputs", [CHUNK, CHUNK + 1, 9_000])
def test_a_node_with_more_inputs_than_an_hset_takes(redis_client, inputs):
    """9,000 inputs: 18,000 values, beyond what one unpack() takes (Lua's stack, ~8,000); a
    node queued after it still gets its own values (the script's place in ARGV and KEYS)."""
    writes = NodeStateWrites()
    big, small = _last(inputs), _last(3, T0 + 50)
    writes.queue(1, T0, big, {}, [])
    writes.queue(2, T0 + 1, small, {}, [])
    writes.flush()
    assert redis_client.hlen(state.last_key(1)) == inputs
    assert redis_client.hgetall(state.last_key(1)) == _raw_last(big)
    assert redis_client.hgetall(state.last_key(2)) == _raw_last(small)
    assert redis_client.hgetall(state.SEEN_KEY) == {b"1": str(T0).encode(), b"2": b"1700000001"}


def test_the_flags_close_the_alarms_of_exactly_the_nodes_that_had_them(redis_client):
    site_b, site_d = (Site.objects.create(name=n, slug=n) for n in ("b", "d"))
    a, b, c, d, e = (make_node(name, 10 + i)[0] for i, name in enumerate("abcde"))
    b.site, d.site = site_b, site_d
    b.save()
    d.save()
    for node in (a, b, c, e):
        raise_alarm(f"node-silent:{node.pk}", "silent", source="node")
    redis_client.sadd(state.SILENT_KEY, a.pk, c.pk, 999)  # b and e: flag already gone
    input_budget.record_skipped(b, ["junk"], 1)
    input_budget.record_skipped(d, ["junk"], 1)

    writes = NodeStateWrites()
    for node in (a, b, c, e):
        writes.queue(node.pk, T0, _last(1), {}, [])
    # d's batch still had an input beyond the bound: its flag is neither read nor cleared.
    writes.queue(d.pk, T0, _last(1), {}, [], skipped_inputs=True)
    writes.flush()

    def silent_open(node) -> bool:
        return Alarm.objects.get(key=f"node-silent:{node.pk}").is_open

    assert [silent_open(n) for n in (a, b, c, e)] == [False, True, False, True]
    assert redis_client.smembers(state.SILENT_KEY) == {b"999"}
    assert redis_client.hkeys(input_budget.CAPPED_NODES) == [str(d.pk).encode()]
    capped_open = Alarm.objects.filter(cleared_at=None, key__startswith="inputs-capped:")
    assert {x.key for x in capped_open} == {input_budget.site_alarm_key(site_d.pk)}


def test_pulse_counter_state_written_as_before(redis_client):
    node, _ = make_node()
    due, recent, unread = (
        Sensor.objects.create(node=node, key=key, kind=cv.PULSE_KIND) for key in ("p1", "p2", "p3")
    )
    specs = [_pulse_spec(s.pk, s.key) for s in (due, recent, unread)]
    states = {
        due.pk: cv.PulseState(T0 + 100, 65_530, 1.05, pending=7),
        recent.pk: cv.PulseState(T0 + 100, 12, 0.1 + 0.2),
        unread.pk: None,  # no state: nothing written for it
    }
    # due: last saved PULSE_SAVE_S ago, saved to the database now; recent: not yet.
    saved = {due.pk: T0 + 100 - PULSE_SAVE_S, recent.pk: T0 + 100 - PULSE_SAVE_S + 1}
    writes = NodeStateWrites()
    writes.queue(node.pk, T0 + 101, _last(2), states, specs, pulse_saved=saved)
    writes.queue(node.pk + 1, T0 + 101, {}, {}, [])  # a node after it, no last values
    writes.flush()

    assert redis_client.hgetall(state.pulse_key(due.pk)) == {
        b"t": b"1700000100",
        b"count": b"65530",
        b"total": b"1.05",
        b"pending": b"7",
        b"saved": b"1700000100",
    }
    assert redis_client.hgetall(state.pulse_key(recent.pk)) == {
        b"t": b"1700000100",
        b"count": b"12",
        b"total": repr(0.1 + 0.2).encode(),
        b"pending": b"",
        b"saved": str(T0 + 100 - PULSE_SAVE_S + 1).encode(),
    }
    assert not redis_client.exists(state.pulse_key(unread.pk))
    row = PulseCounterState.objects.get()
    assert (row.sensor_id, row.t, row.count, row.total, row.pending) == (
        due.pk, T0 + 100, 65_530, 1.05, 7
    )  # fmt: skip
    assert redis_client.hgetall(state.last_key(node.pk)) == _raw_last(_last(2))
    assert not redis_client.exists(state.last_key(node.pk + 1))
    assert redis_client.hget(state.SEEN_KEY, str(node.pk + 1)) == str(T0 + 101).encode()


def test_a_key_of_the_wrong_type_fails_its_write_not_the_other_nodes(redis_client):
    """As the pipeline did: the error is raised, every other write of the pass is made."""
    redis_client.set(state.last_key(2), "not a hash")
    redis_client.sadd(state.SILENT_KEY, 3)
    writes = NodeStateWrites()
    for node_id in (1, 2, 3):
        writes.queue(node_id, T0, _last(2), {}, [])
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        writes.flush()
    assert len(writes) == 0 and 2 not in writes  # not sent again by the next flush
    assert redis_client.hlen(state.SEEN_KEY) == 3
    assert redis_client.hgetall(state.last_key(3)) == _raw_last(_last(2))
    assert redis_client.get(state.last_key(2)) == b"not a hash"
    assert not redis_client.sismember(state.SILENT_KEY, 3)
