"""Returns normalised between two reference policies, and the intervals reported with them.

    from rl.analysis.scores import ScoreScale, discounted_returns, mean_interval

    scale = ScoreScale(zero=21.33, one=30.59, zero_name="best memoryless", one_name="belief-optimal")
    scale.normalise(27.0)                                               # 0.618...
    values = discounted_returns(rollouts.rewards, rollouts.valid(), gamma=0.9)   # one per episode
    mean_interval(values)                                               # {"mean", "low", "high", ...}
    mean_interval(final_scores_of_three_seeds, spread="t")              # Student t over seeds
    mean_interval_or_point(values_that_may_be_one)                      # n = 1: low = high = mean

A normalised score reads as "the fraction of the way from the zero reference to the one
reference": 0 is as good as the zero policy, 1 as good as the one policy, and nothing stops a
policy from scoring below 0 or above 1 (a policy that is not optimal for the measured quantity
can beat a reference on it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from rl.harness.study import mean_interval, mean_interval_or_point  # noqa: F401 - this module's API


@dataclasses.dataclass(frozen=True)
class ScoreScale:
    """An affine map sending `zero` to 0 and `one` to 1."""

    zero: float
    one: float
    zero_name: str
    one_name: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.zero) and math.isfinite(self.one)):
            raise ValueError(f"ScoreScale references must be finite, got zero={self.zero}, one={self.one}")
        if self.one == self.zero:
            raise ValueError(
                f"ScoreScale: {self.zero_name!r} and {self.one_name!r} both score {self.one}, so a "
                "normalised score is undefined; choose references (or a task) where they differ"
            )

    def normalise(self, value):
        """`value` (a number or an array) on the scale; intervals map endpoint by endpoint."""
        scaled = (np.asarray(value, dtype=np.float64) - self.zero) / (self.one - self.zero)
        return float(scaled) if scaled.ndim == 0 else scaled

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def discounted_returns(rewards: np.ndarray, valid: np.ndarray, *, gamma: float) -> np.ndarray:
    """Per episode sum over t of gamma^t r_t, from (episodes, steps) rewards and the mask of steps that happened."""
    rewards, valid = np.asarray(rewards, dtype=np.float64), np.asarray(valid, dtype=bool)
    if rewards.ndim != 2 or rewards.shape != valid.shape:
        raise ValueError(f"rewards {rewards.shape} and valid {valid.shape} must both be (episodes, steps)")
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma={gamma}; expected a discount in (0, 1]")
    weights = gamma ** np.arange(rewards.shape[1])
    return np.where(valid, rewards, 0.0) @ weights


def normalised_interval(interval: dict, scale: ScoreScale) -> dict:
    """`mean_interval`'s figures on `scale` (the map is affine and increasing when one > zero)."""
    low, high = sorted((scale.normalise(interval["low"]), scale.normalise(interval["high"])))
    return {
        **interval,
        "mean": scale.normalise(interval["mean"]),
        "low": low,
        "high": high,
        "stderr": interval["stderr"] / abs(scale.one - scale.zero),
    }
