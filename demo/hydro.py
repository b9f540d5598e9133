"""River flow and a run-of-river hydro turbine. No Django.

Flow drifts slowly (hours) around a seasonal mean as a log-normal random process, with an
occasional spate after rain that decays away. The turbine takes what is left after the
compensation ("hands-off") flow, up to its design flow, and stops below its minimum:
P = η · ρ · g · Q · H.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from demo.weather import OrnsteinUhlenbeck

RHO_WATER = 1000.0  # kg/m³
G = 9.81  # m/s²


@dataclass
class RiverFlow:
    """River flow in l/s."""

    mean_l_s: float = 90.0
    rng: random.Random = field(default_factory=random.Random)
    spate_probability_per_hour: float = 0.03
    log_flow: OrnsteinUhlenbeck = field(init=False)
    spate_l_s: float = 0.0

    def __post_init__(self) -> None:
        self.log_flow = OrnsteinUhlenbeck(
            mean=math.log(self.mean_l_s), sigma=0.35, tau_s=6 * 3600.0, rng=self.rng
        )

    @property
    def flow_l_s(self) -> float:
        assert self.log_flow.value is not None
        return math.exp(self.log_flow.value) + self.spate_l_s

    def step(self, dt_s: float) -> float:
        self.log_flow.step(dt_s)
        # A spate recedes over a few hours.
        self.spate_l_s *= math.exp(-dt_s / 10_800.0)
        if self.rng.random() < self.spate_probability_per_hour * dt_s / 3600.0:
            self.spate_l_s += self.rng.uniform(50.0, 200.0)
        return self.flow_l_s


@dataclass(frozen=True)
class Turbine:
    head_m: float = 25.0
    design_flow_l_s: float = 100.0
    min_flow_l_s: float = 15.0
    compensation_flow_l_s: float = 20.0
    efficiency: float = 0.7

    def turbine_flow_l_s(self, river_l_s: float) -> float:
        available = river_l_s - self.compensation_flow_l_s
        if available < self.min_flow_l_s:
            return 0.0
        return min(available, self.design_flow_l_s)

    def power_w(self, river_l_s: float) -> float:
        q_m3_s = self.turbine_flow_l_s(river_l_s) / 1000.0
        return self.efficiency * RHO_WATER * G * q_m3_s * self.head_m
