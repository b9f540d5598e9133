"""River flow, the hydro turbine, wind and the anemometer counter."""

import random

import pytest

from demo.hydro import RiverFlow, Turbine
from demo.wind import COUNTER_WRAP, Anemometer, Wind


def test_turbine_output_follows_flow_between_minimum_and_design_flow():
    turbine = Turbine(head_m=25.0, design_flow_l_s=100.0, min_flow_l_s=15.0,
                      compensation_flow_l_s=20.0, efficiency=0.7)  # fmt: skip
    assert turbine.power_w(30.0) == 0.0  # 10 l/s available: below minimum, stopped
    low, mid = turbine.power_w(60.0), turbine.power_w(90.0)
    assert 0 < low < mid
    # 70 l/s through the turbine: 0.7 · 1000 · 9.81 · 0.070 · 25 = 12,017 W
    assert mid == pytest.approx(12017.25, rel=1e-4)
    # Above design flow the output is capped.
    assert turbine.power_w(500.0) == turbine.power_w(120.0) == pytest.approx(17167.5, rel=1e-4)


def test_river_flow_varies_slowly_around_its_mean():
    river = RiverFlow(mean_l_s=120.0, rng=random.Random(5), spate_probability_per_hour=0.0)
    flows = [river.step(60.0) for _ in range(7 * 24 * 60)]
    assert all(f > 0 for f in flows)
    # Smooth: no minute-to-minute jump of more than a tenth of the flow.
    assert max(abs(b - a) / a for a, b in zip(flows, flows[1:], strict=False)) < 0.1
    assert 60 < sorted(flows)[len(flows) // 2] < 240
    assert max(flows) / min(flows) > 1.3  # it does vary


def test_turbine_power_tracks_the_river():
    river = RiverFlow(mean_l_s=80.0, rng=random.Random(6))
    turbine = Turbine()
    flows = sorted(river.step(600.0) for _ in range(200))
    powers = [turbine.power_w(f) for f in flows]
    assert powers == sorted(powers)  # more water never gives less power
    assert powers[-1] > powers[0]


def test_anemometer_counts_pulses_in_proportion_to_wind_run_and_wraps_at_16_bits():
    anemometer = Anemometer(pulses_per_m=1.5)
    anemometer.step(100.0, 4.0)
    assert anemometer.counter == 600
    anemometer.counter = COUNTER_WRAP - 10
    anemometer.step(10.0, 2.0)  # 30 pulses
    assert anemometer.counter == 20


def test_wind_is_never_negative():
    wind = Wind(mean_m_s=1.0, rng=random.Random(7))
    assert min(wind.step(60.0) for _ in range(5000)) >= 0.0
