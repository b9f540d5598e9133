"""Smooth random processes and the outside air temperature. No Django.

Clouds, river flow and wind are all "slowly varying around a mean": an Ornstein–Uhlenbeck
process (mean-reverting random walk) gives exactly that, with a correlation time we choose,
and stays smooth at any step size because the update is the exact discretisation.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class OrnsteinUhlenbeck:
    """x reverts to `mean` with time constant `tau_s`; long-run standard deviation `sigma`."""

    mean: float
    sigma: float
    tau_s: float
    value: float | None = None
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        if self.value is None:
            self.value = self.mean

    def step(self, dt_s: float) -> float:
        """Advance by dt_s seconds (exact update: same statistics whatever the step)."""
        assert self.value is not None
        if dt_s <= 0:
            return self.value
        decay = math.exp(-dt_s / self.tau_s)
        spread = self.sigma * math.sqrt(1.0 - decay * decay)
        self.value = self.mean + (self.value - self.mean) * decay + spread * self.rng.gauss(0, 1)
        return self.value


@dataclass
class Clouds:
    """Fraction of clear-sky irradiance reaching the ground, 0.15 (overcast) to 1.0 (clear).

    A latent OU process squashed by a logistic curve: clouds drift over in minutes, and the
    sky spends most of its time either mostly clear or mostly cloudy, as Welsh skies do.
    """

    rng: random.Random = field(default_factory=random.Random)
    tau_s: float = 900.0
    latent: OrnsteinUhlenbeck = field(init=False)

    def __post_init__(self) -> None:
        self.latent = OrnsteinUhlenbeck(mean=0.8, sigma=1.6, tau_s=self.tau_s, rng=self.rng)

    @property
    def clear_fraction(self) -> float:
        assert self.latent.value is not None
        return 0.15 + 0.85 / (1.0 + math.exp(-2.0 * self.latent.value))

    def step(self, dt_s: float) -> float:
        self.latent.step(dt_s)
        return self.clear_fraction


def outside_temperature(day_of_year: int, local_hour: float) -> float:
    """Typical outside air temperature (°C) at Machynlleth for a day of year and local hour.

    Seasonal mean from ~4.5 °C (mid-January) to ~15.5 °C (mid-July), daily swing ±3.5 K
    with the minimum near dawn (~05:00) and the maximum mid-afternoon (~15:00).
    """
    seasonal_mean = 10.0 - 5.5 * math.cos(2 * math.pi * (day_of_year - 20) / 365.0)
    daily = 3.5 * math.cos(2 * math.pi * (local_hour - 15.0) / 24.0)
    return seasonal_mean + daily
