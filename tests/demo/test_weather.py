"""Smooth random processes: clouds, the OU process, outside temperature."""

import random
import statistics

import pytest

from demo.weather import Clouds, OrnsteinUhlenbeck, outside_temperature


def test_ou_process_reverts_to_its_mean_with_the_stated_spread():
    ou = OrnsteinUhlenbeck(mean=5.0, sigma=2.0, tau_s=60.0, value=50.0, rng=random.Random(1))
    samples = [ou.step(30.0) for _ in range(20000)][500:]
    assert statistics.fmean(samples) == pytest.approx(5.0, abs=0.2)
    assert statistics.pstdev(samples) == pytest.approx(2.0, rel=0.1)


def test_ou_process_is_smooth_over_short_steps():
    ou = OrnsteinUhlenbeck(mean=0.0, sigma=1.0, tau_s=3600.0, rng=random.Random(2))
    values = [ou.step(1.0) for _ in range(1000)]
    assert max(abs(b - a) for a, b in zip(values, values[1:], strict=False)) < 0.2


def test_clouds_stay_between_overcast_and_clear_and_do_vary():
    clouds = Clouds(rng=random.Random(3))
    fractions = [clouds.step(60.0) for _ in range(2000)]
    assert min(fractions) >= 0.15
    assert max(fractions) <= 1.0
    assert max(fractions) - min(fractions) > 0.5


def test_outside_is_colder_at_dawn_than_mid_afternoon_and_in_winter_than_summer():
    assert outside_temperature(180, 5.0) < outside_temperature(180, 15.0)
    assert outside_temperature(20, 15.0) < outside_temperature(200, 15.0)
    assert 0 < outside_temperature(20, 5.0) < 5
    assert 17 < outside_temperature(200, 15.0) < 21
