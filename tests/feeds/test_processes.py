"""Input processes with emoncms meanings, and their idempotence under replay."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from feeds.processes import steps as ps
from feeds.processes.run import ProcessRunner, validate_steps

LONDON = ZoneInfo("Europe/London")


@pytest.fixture
def runner(buffer):
    return ProcessRunner(buffer, "Europe/London")


def logged(runner, items):
    return [(f, t, v) for f, t, v, _j in runner.run(items).logged]


def test_log_scale_offset_allowpositive_in_order(runner):
    steps = [
        {"process": "scale", "arg": 2},
        {"process": "log_to_feed", "feed": 1},
        {"process": "offset", "arg": -30},
        {"process": "allowpositive"},
        {"process": "log_to_feed_join", "feed": 2},
    ]
    report = runner.run([("k", steps, 100, 10.0), ("k", steps, 110, 20.0)])
    assert report.logged == [
        (1, 100, 20.0, False),
        (2, 100, 0.0, True),
        (1, 110, 40.0, False),
        (2, 110, 10.0, True),
    ]
    assert runner.buffer.last_values([1, 2]) == {1: (110, 40.0), 2: (110, 10.0)}


def test_power_to_kwh_integrates_and_skips_gaps_over_two_hours(runner):
    steps = [{"process": "power_to_kwh", "feed": 5}]
    items = [("k", steps, t, 3600.0) for t in (0, 10, 20, 20 + 7201, 20 + 7211)]
    got = [round(v, 6) for _f, _t, v in logged(runner, items)]
    # 3600 W = 1 Wh/s: +0.01 kWh per 10 s; the 7201 s gap adds nothing
    assert got == [0.0, 0.01, 0.02, 0.02, 0.03]


def test_power_to_kwh_continues_from_the_feed_last_value(runner):
    runner.buffer.add([(5, 0, 100.0, False)])
    steps = [{"process": "power_to_kwh", "feed": 5}]
    # emoncms power_to_kwh: the time since the feed's last point (10 s) counts too.
    assert logged(runner, [("k", steps, 10, 3600.0), ("k", steps, 20, 3600.0)]) == [
        (5, 10, pytest.approx(100.01)),
        (5, 20, pytest.approx(100.02)),
    ]


def midnight(y, m, d):
    return int(datetime(y, m, d, tzinfo=LONDON).timestamp())


def test_kwh_to_kwhd_counts_today_from_local_midnight_at_local_midnight(runner):
    steps = [{"process": "kwh_to_kwhd", "feed": 6}]
    bst_midnight = int(datetime(2024, 6, 2, tzinfo=LONDON).timestamp())  # 23:00 UTC on 1 June
    items = [
        ("k", steps, bst_midnight - 3600, 10.0),  # 1 June 23:00 local: primes the state
        ("k", steps, bst_midnight - 60, 12.0),  # 1 June: +2
        ("k", steps, bst_midnight + 60, 13.0),  # 2 June: +1, a new day
        ("k", steps, bst_midnight + 120, 12.5),  # a fall is an error: nothing
        ("k", steps, bst_midnight + 180, 14.0),  # +1 on top of the held 13
    ]
    assert logged(runner, items) == [
        (6, midnight(2024, 6, 1), 2.0),
        (6, midnight(2024, 6, 2), 1.0),
        (6, midnight(2024, 6, 2), 1.0),
        (6, midnight(2024, 6, 2), 2.0),
    ]


def test_wh_accumulator_removes_resets_and_spikes(runner):
    steps = [{"process": "wh_accumulator", "feed": 7}]
    values = [100, 110, 5, 15, 100_000, 100_010]  # reset to 5, then a spike
    items = [("k", steps, 10 * i, float(v)) for i, v in enumerate(values)]
    assert [v for _f, _t, v in logged(runner, items)] == [10.0, 10.0, 20.0, 20.0, 30.0]


def test_pulse_diff_logs_the_count_and_passes_on_the_increment(runner):
    # emoncms pulse_diff: the feed holds the count (through signed2unsigned); the increment
    # since the feed's last count goes on; a fall is a restart (the count itself goes on).
    pulse = [{"process": "pulse_diff", "feed": 8}, {"process": "log_to_feed", "feed": 12}]
    items = [("p", pulse, 10 * i, float(v)) for i, v in enumerate([50, 53, 60, 2, 4])]
    out = logged(runner, items)
    assert [v for f, _t, v in out if f == 8] == [50.0, 53.0, 60.0, 2.0, 4.0]
    assert [v for f, _t, v in out if f == 12] == [0.0, 3.0, 7.0, 2.0, 2.0]


def test_ratechange(runner):
    rate = [{"process": "ratechange", "feed": 9}]
    items = [("r", rate, 10 * i, float(v)) for i, v in enumerate([5, 7, 4])]
    assert [v for _f, _t, v in logged(runner, items)] == [2.0, -3.0]


def test_daily_max_and_min(runner):
    steps = [{"process": "max_value", "feed": 10}, {"process": "min_value", "feed": 11}]
    day = int(datetime(2024, 1, 5, 8, tzinfo=LONDON).timestamp())
    items = [("k", steps, day + 60 * i, v) for i, v in enumerate([3.0, 7.0, 1.0])]
    items.append(("k", steps, day + 86400, 4.0))
    out = logged(runner, items)
    # emoncms max_value/min_value write only a new extreme, or the first value of a day.
    assert [v for f, _t, v in out if f == 10] == [3.0, 7.0, 4.0]
    assert [v for f, _t, v in out if f == 11] == [3.0, 1.0, 4.0]
    assert {t for _f, t, _v in out[:4]} == {midnight(2024, 1, 5)}


def test_a_batch_sent_again_is_not_counted_twice(runner):
    """A gateway that got no `ok` sends the same rows again, as a new request (so the stream
    entry's mark does not catch it). power_to_kwh remembers the times it counted and passes
    them by (emoncms would move its clock back and count the batch again); wh_accumulator
    never uses an older count."""
    steps = [
        {"process": "log_to_feed", "feed": 1},
        {"process": "power_to_kwh", "feed": 2},
        {"process": "wh_accumulator", "feed": 3},
    ]
    batch = [("k", steps, 100 + 10 * i, 36.0 * i) for i in range(1, 6)]
    runner.run(batch)
    first = runner.buffer.last_values([2, 3])
    report = runner.run(batch)
    assert report.duplicates == 5
    assert [f for f, *_ in report.logged] == [1] * 5  # only the stateless log, again
    assert runner.buffer.last_values([2, 3]) == first and first[3][1] == 144.0
    # wh_accumulator, which keeps only its last time, finds the rows late; power_to_kwh knew
    # them: resent rows, counted when they first came, so no late reading is reported (staff
    # would read "skipped" for rows that were stored the first time).
    assert report.late == [] and report.replayed == 0


def test_a_resent_batch_is_recognised_up_to_seen_rows(runner):
    """The memory is bounded (steps.SEEN times per step): a resend of SEEN rows is passed by
    whole; of one more, its oldest row is no longer known and is a late reading (emoncms's
    rule: the clock moves back to it)."""
    steps = [{"process": "power_to_kwh", "feed": 2}]
    rows = [("k", steps, 1000 + 10 * i, 3600.0) for i in range(ps.SEEN + 1)]
    runner.run(rows)
    total = runner.buffer.last_values([2])[2]
    at_bound = runner.run(rows[1:])
    assert at_bound.duplicates == ps.SEEN and at_bound.late == [] and at_bound.logged == []
    assert runner.buffer.last_values([2])[2] == total
    over = runner.run(rows)
    assert over.duplicates == ps.SEEN
    assert [(x.t, x.moved_back) for x in over.late] == [(1000, True)]
    state = json.loads(runner.redis.hget(runner.state_key("k"), "0:power_to_kwh:2"))
    assert state["t"] == 1000 and len(state["seen"]) == ps.SEEN


def pending(runner, feed: int) -> list[tuple[int, float]]:
    """A feed's buffered points in the order they were written."""
    records = runner.buffer.pending(feed)
    return list(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


def emoncms_power_to_kwh(readings: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """emoncms's power_to_kwh (process_processlist.php) onto an empty feed: the elapsed time
    since the feed's last time counts when 0 < elapsed < 7200, the total is posted at the
    reading's time and the feed's time becomes the reading's (feed->post, set_timevalue)."""
    last_t, kwh, out = None, 0.0, []
    for t, watts in readings:
        elapsed = t - (t if last_t is None else last_t)
        if 0 < elapsed < 7200:
            kwh += elapsed * watts / 3_600_000.0
        out.append((t, kwh))
        last_t = t
    return out


def test_a_future_reading_then_real_ones_keep_the_kwh_counting_as_emoncms(runner):
    """A bulk row six minutes ahead, then the real readings: the kWh counts on at once, point
    for point as emoncms's power_to_kwh (it used to stay still until the clock passed the
    future row, up to BMS_INGEST_MAX_FUTURE_S). The steps after it see every reading."""
    steps = [
        {"process": "power_to_kwh", "feed": 2},
        {"process": "log_to_feed", "feed": 3},
    ]
    t0 = 1_700_000_000
    readings = [(t0, 3600.0), (t0 + 10, 3600.0), (t0 + 10 + 360, 1800.0)]
    readings += [(t0 + 20 + 10 * i, 3600.0) for i in range(10)]
    for i, (t, watts) in enumerate(readings):  # one stream entry per request, as ingest's
        runner.run([("k", steps, t, watts)], mark=("test:done", f"{t0 * 1000 + i}-0"))
    kwh = pending(runner, 2)
    assert kwh == [(t, pytest.approx(v, rel=1e-6)) for t, v in emoncms_power_to_kwh(readings)]
    assert kwh[-1] == (t0 + 110, pytest.approx(0.01 + 0.18 + 0.09))  # 9 more 10 s at 3.6 kW
    assert [t for t, _v in pending(runner, 3)] == [t for t, _w in readings]


def test_an_earlier_days_figure_is_not_rewritten_by_a_late_reading(runner):
    """emoncms's power_to_kwhd given a reading of the day before its last would write 0 over
    that day's figure (elapsed < 0 in "a new day"); here it is not counted and the day kept."""
    steps = [{"process": "power_to_kwhd", "feed": 6}]
    before_midnight = midnight(2024, 1, 6) - 30
    items = [
        ("k", steps, before_midnight - 20, 3600.0),
        ("k", steps, before_midnight - 10, 3600.0),  # day 5: 0.01 kWh
        ("k", steps, midnight(2024, 1, 6) + 300, 3600.0),  # ahead, into day 6
    ]
    for i, item in enumerate(items):
        runner.run([item], mark=("test:day", f"{i + 1}-0"))
    report = runner.run([("k", steps, before_midnight, 3600.0)], mark=("test:day", "9-0"))
    assert report.logged == []
    assert [(x.t, x.moved_back) for x in report.late] == [(before_midnight, False)]
    same_day = runner.run(
        [("k", steps, midnight(2024, 1, 6) + 100, 3600.0)], mark=("test:day", "10-0")
    )
    [(_f, t, v, _j)] = same_day.logged  # within day 6: the clock moves back, nothing added
    # 340 s at 3.6 kW: the future reading put the interval across midnight in day 6 (emoncms)
    assert t == midnight(2024, 1, 6) and v == pytest.approx(0.34)


def test_input_ontime_falls_back_by_what_a_future_reading_added(runner):
    """emoncms adds the (negative) elapsed time of a late reading: the on-time loses what the
    future one counted ahead and the readings after count it for real."""
    steps = [{"process": "input_ontime", "feed": 7}]
    day = midnight(2024, 1, 5) + 3600
    times = [day, day + 10, day + 370, day + 20, day + 30]
    for i, t in enumerate(times):
        runner.run([("k", steps, t, 1.0)], mark=("test:on", f"{i + 1}-0"))
    assert [v for _t, v in pending(runner, 7)][-4:] == [10.0, 370.0, 20.0, 30.0]


def test_a_batch_whose_mark_is_there_is_not_run_again(runner):
    steps = [{"process": "log_to_feed", "feed": 1}, {"process": "accumulator", "feed": 2}]
    batch = [("k", steps, 100 + 10 * i, 1.0) for i in range(3)]
    first = runner.run(batch, mark=("test:done", "1700000000000-0"))
    assert first.points == 6 and not first.already_done
    again = runner.run(batch, mark=("test:done", "1700000000000-0"))  # redelivered entry
    assert again.already_done and again.logged == []
    older = runner.run(batch, mark=("test:done", "1699999999999-5"))
    assert older.already_done
    assert runner.buffer.last_values([2])[2] == (120, 3.0)
    newer = runner.run([("k", steps, 130, 1.0)], mark=("test:done", "1700000000000-1"))
    assert not newer.already_done and runner.buffer.last_values([2])[2] == (130, 4.0)


def test_points_of_a_batch_are_processed_in_time_order(runner):
    steps = [{"process": "ratechange", "feed": 9}]
    items = [("k", steps, 30, 9.0), ("k", steps, 10, 1.0), ("k", steps, 20, 4.0)]
    assert [v for _f, _t, v in logged(runner, items)] == [3.0, 5.0]


def test_non_finite_inputs_are_skipped_not_logged(runner):
    steps = [{"process": "log_to_feed", "feed": 1}]
    report = runner.run(
        [("k", steps, 10, float("nan")), ("k", steps, 20, "x"), ("k", steps, 30, 1.0)]
    )
    assert report.skipped_bad_values == 2
    assert report.logged == [(1, 30, 1.0, False)]


def test_validate_steps_names_the_step():
    assert validate_steps([{"process": "log_to_feed", "feed": 3}]) == []
    errors = validate_steps(
        [
            {"process": "log_to_feed"},
            {"process": "scale", "arg": "two"},
            {"process": "bogus"},
            "log_to_feed",
            {"process": "offset", "arg": 1, "feed": 2},
            {"process": "power_to_kwh", "feed": True},
        ]
    )
    assert [e.split(":")[0] for e in errors] == [
        "step 0 (log_to_feed)",
        "step 1 (scale)",
        "step 2",
        "step 3",
        "step 4 (offset)",
        "step 5 (power_to_kwh)",
    ]
    assert validate_steps({"process": "scale"}) == ["processes must be a list of steps"]


def test_the_last_values_of_more_feeds_than_luas_stack_are_read_in_one_round_trip(runner):
    # A post may carry 50,000 values (BMS_INGEST_MAX_VALUES), each input's steps reading a
    # feed: the read script unpacks them in slices (unpack() of ~8,000 fails: #26).
    feeds = list(range(1, 20_001))
    runner.redis.hset(
        runner.buffer.last_key, mapping={f: f"{1_700_000_000 + f} {f}.5" for f in feeds[::2]}
    )
    _states, last, _done = runner._load(runner.redis, [], feeds)
    assert len(last) == 10_000
    assert last[1] == (1_700_000_001, 1.5) and last[19_999] == (1_700_019_999, 19_999.5)
    assert 2 not in last and 20_000 not in last
