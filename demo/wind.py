"""Wind speed and a cup anemometer's pulse counter. No Django.

Wind speed: an OU process around a mean (minutes-scale gusts on hours-scale weather), floored
at calm. The anemometer gives `pulses_per_m` pulses per metre of wind run (the usual reed-switch
cup anemometer: 1 pulse/s ≈ 2.4 km/h, i.e. 1.49 pulses per metre) and the node reports its
counter since boot, which wraps at 16 bits as a JeeLib int16 would carry it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from demo.weather import OrnsteinUhlenbeck

COUNTER_WRAP = 1 << 16


@dataclass
class Wind:
    mean_m_s: float = 6.0
    rng: random.Random = field(default_factory=random.Random)
    gusts: OrnsteinUhlenbeck = field(init=False)

    def __post_init__(self) -> None:
        self.gusts = OrnsteinUhlenbeck(mean=self.mean_m_s, sigma=2.5, tau_s=300.0, rng=self.rng)

    @property
    def speed_m_s(self) -> float:
        assert self.gusts.value is not None
        return max(0.0, self.gusts.value)

    def step(self, dt_s: float) -> float:
        self.gusts.step(dt_s)
        return self.speed_m_s


@dataclass
class Anemometer:
    pulses_per_m: float = 1.0 / 0.6708  # 1 pulse/s = 0.6708 m/s (2.4 km/h)
    counter: int = 0
    _fraction: float = 0.0

    def step(self, dt_s: float, speed_m_s: float) -> int:
        """Count the pulses over dt_s at this speed; return the wrapped counter."""
        pulses = speed_m_s * dt_s * self.pulses_per_m + self._fraction
        whole = int(pulses)
        self._fraction = pulses - whole
        self.counter = (self.counter + whole) % COUNTER_WRAP
        return self.counter
