"""Each emoncms input process against emoncms's own behaviour on the same inputs.

Expectations are computed by hand from emoncms's Modules/process/process_processlist.php
(the function named in each test) and process_model.php input() for the skip/goto flow.
Real Redis (the runner's state and the feeds' last values live there).
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from feeds.processes.catalog import BY_ID, KNOWN, PROCESSES
from feeds.processes.run import ProcessRunner
from feeds.store import phpfina

LONDON = ZoneInfo("Europe/London")
OUT = 999  # a log_to_feed at the end of a list shows the value passed on


@pytest.fixture
def runner(buffer):
    return ProcessRunner(buffer, "Europe/London")


def passed_on(runner, steps, readings, **kw):
    """The value each reading leaves at the end of `steps` (None: not logged, a null)."""
    items = [("k", [*steps, {"process": "log_to_feed", "feed": OUT}], t, v) for t, v in readings]
    report = runner.run(items, **kw)
    out = {t: v for f, t, v, _j in report.logged if f == OUT}
    return [out.get(t) for t, _v in readings]


def logged_to(runner, feed, report):
    return [(t, v) for f, t, v, _j in report.logged if f == feed]


def one(runner, steps, value, **kw):
    return passed_on(runner, steps, [(100, value)], **kw)[0]


def test_every_emoncms_process_not_marked_deleted_is_known():
    # process_list() ids without "deleted" => true (9, 13, 16-19 are deleted; 38-41 and 54
    # unused; 70 is commented out of the list but its function is still there).
    live = {*range(1, 9), 10, 11, 12, 14, 15, *range(20, 38), *range(42, 54), *range(55, 60),
            *range(61, 72)}  # fmt: skip
    assert set(BY_ID) == live
    assert all(BY_ID[i] in KNOWN for i in live)
    assert PROCESSES["power_to_kwhd"].id == 5 and PROCESSES["log_to_feed_join"].id == 65


# --- calibration and limits: scale, offset, allowpositive, ... ------------------------------


@pytest.mark.parametrize(
    ("step", "value", "expected"),
    [
        ({"process": "scale", "arg": 0.5}, 10.0, 5.0),  # scale: $value * $arg
        ({"process": "offset", "arg": -1.5}, 10.0, 8.5),  # offset: $value + $arg
        ({"process": "allowpositive"}, -3.0, 0.0),  # allowpositive: < 0 -> 0
        ({"process": "allowpositive"}, 3.0, 3.0),
        ({"process": "allownegative"}, 3.0, 0.0),  # allownegative: > 0 -> 0
        ({"process": "allownegative"}, -3.0, -3.0),
        ({"process": "max_value_allowed", "arg": 100}, 150.0, 100.0),  # > arg -> arg
        ({"process": "max_value_allowed", "arg": 100}, 50.0, 50.0),
        ({"process": "min_value_allowed", "arg": 10}, 5.0, 10.0),  # < arg -> arg
        ({"process": "abs_value"}, -7.0, 7.0),  # abs_value: abs($value)
        ({"process": "signed2unsigned"}, -1.0, 65535.0),  # < 0: += 65536
        ({"process": "signed2unsigned"}, -32768.0, 32768.0),
        ({"process": "signed2unsigned"}, 12.0, 12.0),
        ({"process": "reset2zero"}, 42.0, 0.0),  # reset2zero: 0
        ({"process": "reset2null"}, 42.0, None),  # reset2null: null (nothing logged)
    ],
)
def test_value_processes(runner, step, value, expected):
    assert one(runner, [step], value) == expected


def test_reset2original_returns_the_value_the_list_started_with(runner):
    # reset2original: $this->proc_initialvalue
    steps = [{"process": "scale", "arg": 10}, {"process": "reset2original"}]
    assert one(runner, steps, 4.0) == 4.0


def test_a_null_passes_scale_and_offset_untouched(runner):
    # scale/offset: if ($value === null) return $value
    steps = [
        {"process": "reset2null"},
        {"process": "scale", "arg": 2},
        {"process": "offset", "arg": 1},
    ]
    assert one(runner, steps, 4.0) is None


# --- inputs: times_input, add_input, subtract_input, divide_input, max/min_input ------------


@pytest.mark.parametrize(
    ("name", "other", "expected"),
    [
        ("times_input", 4.0, 40.0),  # $value * $last_value
        ("add_input", 4.0, 14.0),  # $value + $last_value
        ("subtract_input", 4.0, 6.0),  # $value - $last_value
        ("divide_input", 4.0, 2.5),  # $value / $last_value when $last_value > 0
        ("divide_input", 0.0, None),  # else null
        ("divide_input", -2.0, None),  # emoncms divides only by a positive input
        ("max_input", 4.0, 4.0),  # max_input: $value > limit -> limit
        ("max_input", 40.0, 10.0),
        ("min_input", 40.0, 40.0),  # min_input: $value < limit -> limit
        ("min_input", 4.0, 10.0),
    ],
)
def test_input_processes(runner, name, other, expected):
    assert one(runner, [{"process": name, "input": 7}], 10.0, input_last={7: other}) == expected


def test_an_input_with_no_value_yet_makes_arithmetic_null(runner):
    # add_input: if ($value === null || $last_value === null) return null
    assert one(runner, [{"process": "add_input", "input": 7}], 10.0) is None


def test_an_input_posted_earlier_in_the_batch_is_seen_with_its_new_value(runner):
    """emoncms sets each input's value before running its list, in the order posted."""
    other = ("n:b", [], 100, 3.0)  # input 7, no processes
    mine = ("n:a", [{"process": "add_input", "input": 7}, {"process": "log_to_feed", "feed": 1}],
            100, 10.0)  # fmt: skip
    report = runner.run([other, mine], input_last={7: 1.0}, input_ids={"n:b": 7, "n:a": 8})
    assert logged_to(runner, 1, report) == [(100, 13.0)]


# --- feeds: add_feed, sub_feed, multiply_by_feed, divide_by_feed, max/min_feed, source -------


@pytest.mark.parametrize(
    ("name", "feed_value", "expected"),
    [
        ("add_feed", 4.0, 14.0),  # $last_value + $value
        ("sub_feed", 4.0, 6.0),  # $value - $last_value
        ("multiply_by_feed", 4.0, 40.0),
        ("divide_by_feed", 4.0, 2.5),
        ("divide_by_feed", 0.0, None),  # $last_value != 0 else null
        ("divide_by_feed", -4.0, -2.5),  # (a feed may be negative, unlike divide_input)
        ("max_feed", 4.0, 4.0),
        ("min_feed", 40.0, 40.0),
        ("source_feed_data_time", 4.0, 4.0),  # the feed's last value replaces the value
        ("add_source_feed", 4.0, 14.0),
        ("sub_source_feed", 4.0, 6.0),
        ("multiply_by_source_feed", 4.0, 40.0),
        ("divide_by_source_feed", 4.0, 2.5),
        ("divide_by_source_feed", 0.0, None),
        ("reciprocal_by_source_feed", 4.0, 0.25),  # 1 / $last
        ("reciprocal_by_source_feed", 0.0, None),
    ],
)
def test_feed_processes(runner, name, feed_value, expected):
    runner.buffer.add([(5, 50, feed_value, False)])
    assert one(runner, [{"process": name, "feed": 5}], 10.0) == expected


def test_feed_arithmetic_on_a_feed_with_no_value_is_null_and_max_feed_limits_at_zero(runner):
    assert one(runner, [{"process": "add_feed", "feed": 5}], 10.0) is None
    # max_feed: $timevalue['value'] * 1 turns a missing value into 0
    assert one(runner, [{"process": "max_feed", "feed": 6}], 10.0) == 0.0


def test_feed_processes_read_the_feed_file_when_redis_has_no_value(buffer, feed_dir):
    phpfina.write(feed_dir, 5, 10, 1000, 4.0)
    phpfina.write(feed_dir, 5, 10, 1010, 8.0)
    runner = ProcessRunner(
        buffer,
        file_last=lambda ids: {i: (1010, 8.0) for i in ids if phpfina.read_meta(feed_dir, i)},
    )
    assert one(runner, [{"process": "sub_feed", "feed": 5}], 10.0) == 2.0


# --- conditionals and goto (process_model input(): skip one, goto position) ----------------


@pytest.mark.parametrize(
    ("name", "arg", "value", "skips"),
    [
        ("if_zero_skip", None, 0.0, True),
        ("if_zero_skip", None, 1.0, False),
        ("if_not_zero_skip", None, 1.0, True),
        ("if_not_zero_skip", None, 0.0, False),
        ("if_gt_skip", 5, 6.0, True),
        ("if_gt_skip", 5, 5.0, False),
        ("if_gt_equal_skip", 5, 5.0, True),
        ("if_lt_skip", 5, 4.0, True),
        ("if_lt_skip", 5, 5.0, False),
        ("if_lt_equal_skip", 5, 5.0, True),
        ("if_equal_skip", 5, 5.0, True),
        ("if_equal_skip", 5, 5.5, False),
        ("if_not_equal_skip", 5, 5.5, True),
        ("if_not_equal_skip", 5, 5.0, False),
    ],
)
def test_conditionals_skip_the_next_step(runner, name, arg, value, skips):
    cond = {"process": name} | ({} if arg is None else {"arg": arg})
    steps = [cond, {"process": "offset", "arg": 100}]
    assert one(runner, steps, value) == (value if skips else value + 100)


def test_if_null_skip_and_if_not_null_skip(runner):
    null = [{"process": "reset2null"}, {"process": "if_null_skip"}, {"process": "reset2zero"}]
    assert one(runner, null, 3.0) is None  # the reset2zero was skipped
    not_null = [{"process": "if_not_null_skip"}, {"process": "reset2zero"}]
    assert one(runner, not_null, 3.0) == 3.0
    # PHP: null == 0, so if_zero_skip skips on a null too
    zero = [{"process": "reset2null"}, {"process": "if_zero_skip"}, {"process": "reset2zero"}]
    assert one(runner, zero, 3.0) is None


def test_goto_jumps_to_a_1_based_position(runner):
    # goto_process: proc_goto = arg - 2, then the loop's ++: position 4 (1-based) runs next.
    steps = [
        {"process": "goto_process", "arg": 4},
        {"process": "offset", "arg": 100},  # 2: jumped over
        {"process": "offset", "arg": 1000},  # 3: jumped over
        {"process": "scale", "arg": 2},  # 4
    ]
    assert one(runner, steps, 3.0) == 6.0


def test_goto_1_lands_on_position_2_as_in_emoncms(runner):
    # arg 1: proc_goto = -1 -> 0, then ++ -> index 1 (position 2). A step 1 that is the goto
    # itself would loop forever otherwise; emoncms's clamp makes it a no-op.
    steps = [{"process": "goto_process", "arg": 1}, {"process": "offset", "arg": 1}]
    assert one(runner, steps, 3.0) == 4.0


def test_a_goto_loop_stops_after_twice_the_list_length(runner):
    # process_model input(): $steps > $total*2 stops the list (emoncms also disables it).
    steps = [{"process": "offset", "arg": 1}, {"process": "goto_process", "arg": 1}]
    items = [("k", [*steps, {"process": "log_to_feed", "feed": OUT}], 100, 0.0)]
    report = runner.run(items)
    assert report.loops == 1 and report.logged == []


def test_a_conditional_with_goto_makes_an_if_else(runner):
    # if > 10: skip the goto, double; else goto the end (position 5) and add 1.
    steps = [
        {"process": "if_gt_skip", "arg": 10},
        {"process": "goto_process", "arg": 4},
        {"process": "scale", "arg": 2},
        {"process": "error_found"},  # stops the list here (proc_goto = PHP_INT_MAX)
    ]
    items = [("k", [*steps[:3], {"process": "log_to_feed", "feed": 1}, steps[3]], t, v)
             for t, v in ((100, 20.0), (110, 5.0))]  # fmt: skip
    assert logged_to(runner, 1, runner.run(items)) == [(100, 40.0), (110, 5.0)]


# --- energy and counters -----------------------------------------------------------------------


def local(y, m, d, h=0, mi=0):
    return int(datetime(y, m, d, h, mi, tzinfo=LONDON).timestamp())


def test_power_to_kwhd_sums_each_local_day_at_its_midnight(runner):
    """power_to_kwhd: kWh of the day so far, posted at getstartday($time_now); a new day
    starts from this interval's increment; over a 2 h gap nothing is added."""
    steps = [{"process": "power_to_kwhd", "feed": 6}]
    t0 = local(2024, 7, 4, 23, 59)  # BST: local midnight of 5 July is 23:00 UTC on 4 July
    readings = [(t0, 3600.0), (t0 + 30, 3600.0), (t0 + 60, 3600.0), (t0 + 60 + 7200, 3600.0)]
    report = runner.run([("k", steps, t, v) for t, v in readings])
    assert logged_to(runner, 6, report) == [
        (local(2024, 7, 4), 0.0),
        (local(2024, 7, 4), pytest.approx(0.03)),  # 30 s at 1 Wh/s
        (local(2024, 7, 5), pytest.approx(0.03)),  # the first 5 July interval (emoncms)
        (local(2024, 7, 5), pytest.approx(0.03)),  # a 2 h gap adds nothing
    ]


def test_kwh_to_kwhd_starts_from_the_feeds_value_when_it_is_todays(runner):
    """kwh_to_kwhd: today's total = the kWh/d feed's value + the increase (same day)."""
    runner.buffer.add([(6, local(2024, 1, 5), 2.5, False)])  # today so far, as the feed says
    steps = [{"process": "kwh_to_kwhd", "feed": 6}]
    items = [("k", steps, local(2024, 1, 5, 10), 100.0), ("k", steps, local(2024, 1, 5, 11), 101.5)]
    assert logged_to(runner, 6, runner.run(items)) == [(local(2024, 1, 5), 4.0)]


def test_input_ontime_counts_seconds_high_per_day(runner):
    """input_ontime: seconds since the last reading added while the value is > 0 (and the
    gap < 2 h); a new day starts from the last interval."""
    steps = [{"process": "input_ontime", "feed": 6}]
    t0 = local(2024, 1, 5, 23, 58)
    values = [1.0, 1.0, 0.0, 1.0, 1.0]  # every 30 s, across midnight
    report = runner.run([("k", steps, t0 + 30 * i, v) for i, v in enumerate(values)])
    assert [v for _t, v in logged_to(runner, 6, report)] == [0.0, 30.0, 30.0, 60.0, 30.0]
    assert [t for t, _v in logged_to(runner, 6, report)][-1] == local(2024, 1, 6)


def test_whinc_to_kwhd_adds_wh_increments_as_kwh_per_day(runner):
    steps = [{"process": "whinc_to_kwhd", "feed": 6}]
    t0 = local(2024, 1, 5, 23, 59)
    report = runner.run([("k", steps, t0 + 30 * i, 500.0) for i in range(3)])
    assert [v for _t, v in logged_to(runner, 6, report)] == [0.5, 1.0, 0.5]  # new day at 00:00


def test_accumulator_adds_each_value_to_the_feed(runner):
    runner.buffer.add([(6, 50, 10.0, False)])
    steps = [{"process": "accumulator", "feed": 6}]
    assert passed_on(runner, steps, [(100, 1.5), (110, 2.0)]) == [11.5, 13.5]


def test_kwh_to_power(runner):
    # kwh_to_power: (kWh - last kWh) * 3600000 / seconds; 0 on the first reading
    steps = [{"process": "kwh_to_power", "feed": 6}]
    assert passed_on(runner, steps, [(100, 10.0), (160, 10.05)]) == [0.0, pytest.approx(3000.0)]


def test_kwh_accumulator_removes_resets_and_spikes_over_60_kw(runner):
    steps = [{"process": "kwh_accumulator", "feed": 6}]
    # +0.1 kWh in 10 s = 36 kW (kept); reset to 0.05; +1 kWh in 10 s = 360 kW (a spike)
    values = [5.0, 5.1, 0.05, 0.15, 1.15, 1.25]
    report = runner.run([("k", steps, 10 * i, v) for i, v in enumerate(values)])
    assert [round(v, 6) for _t, v in logged_to(runner, 6, report)] == [0.1, 0.1, 0.2, 0.2, 0.3]


def test_pulse_diff_unwraps_a_signed_count_and_ignores_a_zero(runner):
    """pulse_diff: signed2unsigned first; a count not > 0 returns nothing (null)."""
    steps = [{"process": "pulse_diff", "feed": 6}]
    readings = [(10, 32767.0), (20, -32768.0), (30, 0.0), (40, -32760.0)]
    assert passed_on(runner, steps, readings) == [0.0, 1.0, None, 8.0]
    report_feed = [v for _t, v in runner.buffer.last_values([6]).values()]
    assert report_feed == [32776.0]  # the count, unsigned, is what the feed holds


def test_power_to_kwh_15m_and_custom_write_each_slot_at_its_end(runner):
    """power_to_kwh_custom: kWh within each `minutes` slot from local midnight, posted at
    the slot's end; the first reading of a slot adds its interval only if <= slot length."""
    steps = [{"process": "power_to_kwh_custom", "minutes": 15, "feed": 6}]
    t0 = local(2024, 1, 5, 10, 14)
    report = runner.run([("k", steps, t0 + 30 * i, 3600.0) for i in range(3)])
    assert logged_to(runner, 6, report) == [
        (local(2024, 1, 5, 10, 15), 0.0),
        (local(2024, 1, 5, 10, 15), pytest.approx(0.03)),
        (local(2024, 1, 5, 10, 30), pytest.approx(0.03)),
    ]
    fixed = [{"process": "power_to_kwh_15m", "feed": 7}]
    report = runner.run([("j", fixed, t0 + 30 * i, 3600.0) for i in range(3)])
    assert [v for _t, v in logged_to(runner, 7, report)] == pytest.approx([0.0, 0.03, 0.03])


def test_update_feed_data_writes_the_value_at_the_start_of_the_day(runner):
    steps = [{"process": "update_feed_data", "feed": 6}]
    report = runner.run([("k", steps, local(2024, 7, 5, 15), 7.0)])
    assert logged_to(runner, 6, report) == [(local(2024, 7, 5), 7.0)]


def test_publish_to_mqtt_hands_the_value_and_topic_to_the_caller(runner):
    steps = [{"process": "publish_to_mqtt", "topic": "home/power/kitchen"}]
    report = runner.run([("k", steps, 100, 230.5)])
    assert report.published == [("home/power/kitchen", 100, 230.5)]


# --- the day slot: a file reads the same day in emoncms and here ---------------------------


@pytest.mark.parametrize(
    ("day", "slot_utc"),
    [
        # Summer: local midnight of 5 July is 23:00 UTC on 4 July; emoncms's PHPFina floors
        # it to the 86400 s slot of 4 July (post_multiple: floor($timestamp / interval)).
        ((2024, 7, 5), datetime(2024, 7, 4, tzinfo=ZoneInfo("UTC"))),
        ((2024, 1, 5), datetime(2024, 1, 5, tzinfo=ZoneInfo("UTC"))),
    ],
)
def test_a_daily_figure_lands_in_emoncms_day_slot(runner, feed_dir, day, slot_utc):
    steps = [{"process": "max_value", "feed": 6}]
    runner.run([("k", steps, local(*day, 15), 21.5)])
    for record in runner.buffer.pending(6):
        phpfina.write(feed_dir, 6, 86400, int(record["t"]), float(record["v"]))
    meta, data = phpfina.open_feed(feed_dir, 6)
    assert meta.start_time == int(slot_utc.timestamp()) and data.tolist() == [21.5]


def test_on_the_spring_change_two_days_share_emoncms_slot_as_in_emoncms(runner):
    """getstartday of 31 March 2024 is 00:00 UTC, of 1 April 23:00 UTC on 31 March: floored
    to 86400 s both are the 31 March slot, so a daily file holds 1 April's figure there."""
    steps = [{"process": "max_value", "feed": 6}]
    runner.run(
        [("k", steps, local(2024, 3, 31, 12), 1.0), ("k", steps, local(2024, 4, 1, 12), 2.0)]
    )
    slots = {int(r["t"]) // 86400 * 86400 for r in runner.buffer.pending(6)}
    assert slots == {int(datetime(2024, 3, 31, tzinfo=ZoneInfo("UTC")).timestamp())}
