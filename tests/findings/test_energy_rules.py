"""The energy rules on recorded series, with and without their fault, through the real feed
store and MeterDay (findings/energy_checks.py); costs checked against hand computations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from energy.benchmarks import DEFAULT_FACTORS
from findings import rules
from findings.evaluate import evaluate
from findings.models import Finding
from tests.findings.conftest import MONDAY, WEEK

H = timedelta(hours=1)
PRICE = 0.25  # £/kWh of electricity
HISTORY = 4 * WEEK
ELEC_KG = DEFAULT_FACTORS["electricity"]


@pytest.fixture
def site(db, redis_client):
    from energy.models import FuelRate, MeterNode
    from sensors.models import Site

    site = Site.objects.create(name="CAT", slug="cat")
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=PRICE)
    office = MeterNode.objects.create(site=site, name="Office", kind="building")
    return {"site": site, "office": office}


def feed(name: str, unit: str):
    from feeds.models import Feed

    return Feed.objects.create(name=name, tag="t", unit=unit, interval=3600)


def meter(node, name: str, fuel: str, unit: str = "W", **kw):
    from energy.models import Meter

    return Meter.objects.create(
        node=node, name=name, fuel=fuel, source="power", feed=feed(name, unit), **kw
    )


def record(feed_id: int, start, hours: int, value_at) -> None:
    """An hourly feed: value_at(the hour's local datetime)."""
    from feeds.store import service as feed_service

    points = [(feed_id, int((start + i * H).timestamp()), value_at(start + i * H)) for i in
              range(hours)]  # fmt: skip
    feed_service.log_points(points)


def office_load(night_w: float):
    def value(t) -> float:
        return night_w if rules_out_of_hours(t) else 5000.0

    return value


def rules_out_of_hours(t) -> bool:
    from findings.energy_detect import out_of_hours

    return out_of_hours(t, opens=rules.OPENS_HOUR, closes=rules.CLOSES_HOUR)


# --- out-of-hours base load ---------------------------------------------------------------


def test_a_night_base_load_risen_half_a_kilowatt_is_found_and_costed(site):
    m = meter(site["office"], "Office main", "electricity")
    record(m.feed_id, MONDAY - HISTORY, 4 * 168, office_load(500))
    record(m.feed_id, MONDAY, 168, office_load(1000))  # something left on every night
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 1
    f = Finding.objects.get(rule=rules.BASE_LOAD_RISING)
    assert f.subject == "Electricity meter 'Office main' (Office)"
    # by hand: +0.5 kW × (5 weekdays × 12 h + 48 h) = 0.5 × 108 = 54 kWh a week;
    # × £0.25 = £13.50; × the electricity factor
    assert f.waste_kwh_week == pytest.approx(54.0)
    assert f.waste_money_week == pytest.approx(13.50)
    assert f.waste_kg_co2_week == pytest.approx(54 * ELEC_KG, abs=0.001)
    assert "0.50 kW against 0.50 kW" not in f.detail and "+0.50 kW" in f.detail
    assert f.evidence == [{"feed": m.feed_id, "name": "Office main"}]
    assert "left on" in f.what_to_check


def test_a_steady_base_load_and_a_busy_day_are_no_finding(site):
    m = meter(site["office"], "Office main", "electricity")
    record(m.feed_id, MONDAY - HISTORY, 4 * 168, office_load(500))
    # 20 W more at night (under the 100 W bar) and a day far busier than before
    record(m.feed_id, MONDAY, 168, lambda t: 520.0 if rules_out_of_hours(t) else 9000.0)
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.BASE_LOAD_RISING).exists()


def test_a_meter_without_two_weeks_of_history_is_not_judged(site):
    m = meter(site["office"], "New meter", "electricity")
    record(m.feed_id, MONDAY - WEEK, 168, office_load(500))
    record(m.feed_id, MONDAY, 168, office_load(2000))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.BASE_LOAD_RISING).exists()


def test_a_register_meter_in_kwh_is_read_as_its_hourly_rise(site):
    from energy.models import Meter

    m = Meter.objects.create(node=site["office"], name="Register", fuel="electricity",
                             source="cumulative", feed=feed("Register", "kWh"))  # fmt: skip
    total, rows = 0.0, []
    for i in range(5 * 168):
        t = MONDAY - HISTORY + i * H
        rows.append((t, total))
        night = 1.0 if t >= MONDAY else 0.5
        total += night if rules_out_of_hours(t) else 5.0
    record(m.feed_id, MONDAY - HISTORY, len(rows), dict(rows).__getitem__)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.BASE_LOAD_RISING)
    assert f.waste_kwh_week == pytest.approx(54.0)


SUNDAY_NOON = MONDAY + 6 * 24 * H + 12 * H  # the last 12 out-of-hours hours of the week


def test_a_base_load_stepped_up_on_the_last_night_is_found_and_costed_as_a_week_of_it(site):
    m = meter(site["office"], "Office main", "electricity")
    record(m.feed_id, MONDAY - HISTORY, 4 * 168, office_load(500))
    # a heater left on from Sunday noon: the week's 10th percentile has not moved, the last
    # night's has
    record(m.feed_id, MONDAY, 168, lambda t: 1000.0 if t >= SUNDAY_NOON else office_load(500)(t))
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.BASE_LOAD_RISING)
    # by hand, as the week's look: +0.5 kW × 108 out-of-hours hours = 54 kWh a week (what it
    # costs while it stays on), × £0.25 = £13.50
    assert f.waste_kwh_week == pytest.approx(54.0)
    assert f.waste_money_week == pytest.approx(13.50)
    assert "on the last night" in f.detail and "+0.50 kW" in f.detail
    assert f.period_start == SUNDAY_NOON


def _last_night(site, night_w) -> None:
    m = meter(site["office"], "Office main", "electricity")
    record(m.feed_id, MONDAY - HISTORY, 4 * 168, office_load(500))
    record(
        m.feed_id, MONDAY, 168, lambda t: night_w(t) if t >= SUNDAY_NOON else office_load(500)(t)
    )
    evaluate(MONDAY, MONDAY + WEEK)


def test_a_noisy_last_night_is_no_finding(site):
    # ±400 W hour by hour about 700 W: its quiet hours are the old base
    _last_night(site, lambda t: 300.0 if t.hour % 2 else 1100.0)
    assert not Finding.objects.filter(rule=rules.BASE_LOAD_RISING).exists()


def test_a_last_night_with_a_cleaners_hour_is_no_finding(site):
    _last_night(site, lambda t: 3000.0 if t.hour == 21 else 500.0)
    assert not Finding.objects.filter(rule=rules.BASE_LOAD_RISING).exists()


def test_a_last_night_like_the_meters_cold_nights_before_is_no_finding(site):
    # frost heaters: every fifth night (of 12 out-of-hours hours) at 900 W before; the last
    # night at 900 W is one of them, not a new load (the week's base is still 500 W)
    m = meter(site["office"], "Office main", "electricity")
    night = iter(range(10**6))
    cold = {}

    def before(t) -> float:
        if not rules_out_of_hours(t):
            return 5000.0
        k = cold.setdefault(t, next(night) // 12 % 5 == 4)
        return 900.0 if k else 500.0

    record(m.feed_id, MONDAY - HISTORY, 4 * 168, before)
    record(m.feed_id, MONDAY, 168, lambda t: 900.0 if t >= SUNDAY_NOON else office_load(500)(t))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.BASE_LOAD_RISING).exists()


# --- a building above its model (the CUSUM turning up) ------------------------------------


def _days_of_use(site, values: list[float]) -> None:
    from energy.models import ExpectedUse, Meter, MeterDay

    m = Meter.objects.create(node=site["office"], name="Office main", fuel="electricity",
                             source="cumulative", feed=feed("Office kWh", "kWh"))  # fmt: skip
    days = [(MONDAY + i * 24 * H).date() for i in range(len(values))]
    MeterDay.objects.bulk_create(
        [MeterDay(meter=m, day=d, value=v, status="measured") for d, v in zip(days, values,
                                                                             strict=True)]
    )  # fmt: skip
    ExpectedUse.objects.create(node=site["office"], fuel="electricity", start=days[0],
                               end=days[-1], value=100.0 * len(days))  # fmt: skip


def test_four_days_in_a_row_above_the_model_are_found_with_the_excess_as_cost(site):
    _days_of_use(site, [100, 101, 99, 120, 120, 120, 120])
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.ABOVE_MODEL)
    assert f.subject == "Building 'Office' (electricity)"
    # by hand: the model is 100 kWh a day; Thursday to Sunday used 20 more each: 80 kWh in
    # the week, × £0.25 = £20.00
    assert f.waste_kwh_week == pytest.approx(80.0)
    assert f.waste_money_week == pytest.approx(20.0)
    assert (f.period_start, f.period_end) == (MONDAY + 3 * 24 * H, MONDAY + WEEK)


def test_use_scattered_about_the_model_is_no_finding(site):
    # above on three days in a row, and days a little above (under 5 %) between them
    _days_of_use(site, [120, 120, 120, 90, 103, 104, 103])
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.ABOVE_MODEL).exists()


# --- PV yield -----------------------------------------------------------------------------

SHAPE = {9: 0.25, 10: 0.5, 11: 0.75, 12: 1.0, 13: 1.0, 14: 0.75, 15: 0.5, 16: 0.25}  # 5 h/day


def pv(peak_w: float, share=lambda t: 1.0):
    return lambda t: peak_w * SHAPE.get(t.hour, 0.0) * share(t)


def _array(site, name: str):
    return meter(site["office"], name, "generation", generator="pv")


def test_an_array_making_less_than_its_sibling_is_found_with_the_missing_kwh(site):
    a, b = _array(site, "Roof A"), _array(site, "Roof B")
    record(a.feed_id, MONDAY - HISTORY, 4 * 168, pv(4000))
    record(b.feed_id, MONDAY - HISTORY, 4 * 168, pv(2000))
    # a cloudier week: B makes 80 % of its usual; A, half shaded, 50 %
    record(a.feed_id, MONDAY, 168, pv(4000, lambda t: 0.5))
    record(b.feed_id, MONDAY, 168, pv(2000, lambda t: 0.8))
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.PV_LOW_YIELD)
    assert f.subject == "PV array 'Roof A' (Office)"
    # by hand: A makes 4 kW × 5 h = 20 kWh a day, 140 a week; at B's 80 % it would have made
    # 112, it made 70: 42 kWh missing, × £0.25 = £10.50 (bought instead)
    assert f.waste_kwh_week == pytest.approx(42.0)
    assert f.waste_money_week == pytest.approx(10.50)
    assert f.waste_kg_co2_week == pytest.approx(42 * ELEC_KG, abs=0.001)


def test_a_cloudy_week_over_every_array_is_no_finding(site):
    a, b = _array(site, "Roof A"), _array(site, "Roof B")
    record(a.feed_id, MONDAY - HISTORY, 4 * 168, pv(4000))
    record(b.feed_id, MONDAY - HISTORY, 4 * 168, pv(2000))
    record(a.feed_id, MONDAY, 168, pv(4000, lambda t: 0.4))
    record(b.feed_id, MONDAY, 168, pv(2000, lambda t: 0.45))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.PV_LOW_YIELD).exists()


def test_a_lone_array_below_its_clear_day_envelope_is_found(site):
    a = _array(site, "Barn")
    record(a.feed_id, MONDAY - HISTORY, 4 * 168, pv(4000, lambda t: 1.0 if t.day % 3 else 0.3))
    record(a.feed_id, MONDAY, 168, pv(4000, lambda t: 0.6))  # even its best day
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.PV_LOW_YIELD)
    # by hand: it made 0.6 × 140 = 84 kWh; scaled up to its envelope 84 ÷ 0.6 = 140: 56 missing
    assert f.waste_kwh_week == pytest.approx(56.0)
    assert "60 %" in f.detail


def test_a_lone_array_with_one_clear_day_in_a_grey_week_is_no_finding(site):
    a = _array(site, "Barn")
    record(a.feed_id, MONDAY - HISTORY, 4 * 168, pv(4000))
    record(a.feed_id, MONDAY, 168, pv(4000, lambda t: 1.0 if t.weekday() == 2 else 0.3))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.PV_LOW_YIELD).exists()


SUNDAY = MONDAY + 6 * 24 * H


def _two_arrays_a_sunday(site, a_share, b_share) -> None:
    """Roof A (4 kWp) and roof B (2 kWp): four clear weeks, a clear week, then a Sunday with
    each at its share of its clear-day output, hour by hour."""
    a, b = _array(site, "Roof A"), _array(site, "Roof B")
    for m, peak, share in ((a, 4000, a_share), (b, 2000, b_share)):
        record(m.feed_id, MONDAY - HISTORY, 4 * 168, pv(peak))
        record(m.feed_id, MONDAY, 168, pv(peak, lambda t, s=share: s(t) if t >= SUNDAY else 1.0))
    evaluate(MONDAY, MONDAY + WEEK)


def test_an_array_shaded_on_the_last_bright_day_is_found_within_the_day(site):
    _two_arrays_a_sunday(site, lambda t: 0.5, lambda t: 1.0)
    f = Finding.objects.get(rule=rules.PV_LOW_YIELD)
    assert f.subject == "PV array 'Roof A' (Office)"
    # the week's look: A made 6 × 20 + 10 = 130 kWh, 93 % of its past rate against B's 100 %:
    # not under 80 %. The day's: on its 8 bright hours it made half its envelope, B all of its.
    # By hand: (1 - 0.5) × 140 kWh (a week at its past rate) = 70 kWh a week, × £0.25 = £17.50
    assert "8 bright hours" in f.detail and "50 %" in f.detail
    assert f.waste_kwh_week == pytest.approx(70.0)
    assert f.waste_money_week == pytest.approx(17.50)
    assert (f.period_start, f.period_end) == (SUNDAY + 9 * H, SUNDAY + 17 * H)


def test_a_grey_last_day_is_no_finding_though_one_array_fell_further(site):
    # B at 50 % of its envelope all day (under the 60 % of a bright hour), A at 30 %
    _two_arrays_a_sunday(site, lambda t: 0.3, lambda t: 0.5)
    assert not Finding.objects.filter(rule=rules.PV_LOW_YIELD).exists()


def test_a_cloud_over_one_array_for_two_hours_of_a_bright_day_is_no_finding(site):
    _two_arrays_a_sunday(site, lambda t: 0.2 if t.hour in (11, 14) else 1.0, lambda t: 1.0)
    assert not Finding.objects.filter(rule=rules.PV_LOW_YIELD).exists()


# --- hydro with water and no output -------------------------------------------------------


def _turbine(site):
    from energy.models import Meter

    flow = feed("River flow", "l/s")
    return Meter.objects.create(node=site["office"], name="Turbine", fuel="generation",
                                source="power", feed=feed("Turbine", "W"), generator="hydro",
                                flow_feed=flow)  # fmt: skip


def _river(t) -> float:
    """40 to 120 l/s and round again, hour by hour."""
    return 40.0 + int(t.timestamp() // 3600) % 81


def _output(flow: float) -> float:
    return 150.0 * (flow - 20) if flow >= 35 else 0.0


def test_a_turbine_idle_with_water_is_found_with_what_it_made_at_that_flow(site):
    m = _turbine(site)
    record(m.flow_feed_id, MONDAY - HISTORY, 4 * 168, _river)
    record(m.feed_id, MONDAY - HISTORY, 4 * 168, lambda t: _output(_river(t)))
    stopped = (MONDAY + 48 * H, MONDAY + 54 * H)  # Wednesday 00:00-06:00: screen blocked
    record(m.flow_feed_id, MONDAY, 168, lambda t: 80.0)
    record(m.feed_id, MONDAY, 168, lambda t: 0.0 if stopped[0] <= t < stopped[1] else 9000.0)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.HYDRO_NO_OUTPUT)
    assert (f.period_start, f.period_end) == stopped
    # by hand: at 80 l/s ± 20 % (64-96) it made 150 × (flow - 20) W, median at 80 l/s: 9 kW;
    # 6 h × 9 kW = 54 kWh, × £0.25 = £13.50
    assert f.waste_kwh_week == pytest.approx(54.0)
    assert f.waste_money_week == pytest.approx(13.50)
    assert [e["feed"] for e in f.evidence] == [m.feed_id, m.flow_feed_id]


def test_a_turbine_stopped_for_want_of_water_is_no_finding(site):
    m = _turbine(site)
    record(m.flow_feed_id, MONDAY - HISTORY, 4 * 168, _river)
    record(m.feed_id, MONDAY - HISTORY, 4 * 168, lambda t: _output(_river(t)))
    record(m.flow_feed_id, MONDAY, 168, lambda t: 30.0)  # a dry week: below what it runs on
    record(m.feed_id, MONDAY, 168, lambda t: 0.0)
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.HYDRO_NO_OUTPUT).exists()


def test_only_a_hydro_generation_meter_has_a_flow_feed(site):
    from energy.models import Meter

    m = Meter(node=site["office"], name="Main", fuel="electricity", source="power",
              feed=feed("Main", "W"), generator="hydro", flow_feed=feed("Flow", "l/s"))  # fmt: skip
    with pytest.raises(ValidationError) as caught:
        m.full_clean()
    assert set(caught.value.message_dict) >= {"generator"}
    m.fuel, m.generator = "generation", "pv"
    with pytest.raises(ValidationError) as caught:
        m.full_clean()
    assert set(caught.value.message_dict) == {"flow_feed"}
    m.generator = "hydro"
    m.full_clean()


def test_an_hourly_read_ends_before_the_hour_that_starts_at_its_end(site):
    """The hour starting at `end` is not judged: a run replaying recorded history saw the
    next hour of its own future, and a live run an hour barely begun."""
    from findings.energy_checks import hourly

    m = meter(site["office"], "Main", "electricity")
    record(m.feed_id, MONDAY, 10, lambda t: float(t.hour))
    got = hourly(m.feed_id, MONDAY + 2 * H, MONDAY + 5 * H)
    assert [(t - MONDAY) / H for t, _ in got] == [2, 3, 4]
    assert [v for _, v in got] == [2.0, 3.0, 4.0]
