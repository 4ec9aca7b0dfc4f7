"""Monte Carlo value of a belief policy in POMDPEnv: the check that a solver's bound is what its policy earns.

    estimate = rollout_value(pomdp, solution.action, episodes=1000, seed=0)
    estimate.mean, estimate.standard_error, estimate.tail_bound

Each episode runs `horizon` steps from the start belief and sums the discounted rewards. The
steps beyond the horizon are worth at most discount**horizon / (1 - discount) times the largest
absolute expected reward: `tail_bound`, chosen small against the standard error by default.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from rl.envs.pomdp.env import POMDPEnv
from rl.envs.pomdp.model import FinitePOMDP
from rl.envs.solvers.mdp import require_discount_below_one


@dataclasses.dataclass(frozen=True)
class RolloutEstimate:
    mean: float
    standard_error: float
    tail_bound: float
    episodes: int
    horizon: int


def _largest_value(pomdp: FinitePOMDP) -> float:
    """The largest absolute expected reward over 1 - discount: a bound on any policy's |value|."""
    return float(np.abs(pomdp.expected_rewards).max()) / (1.0 - pomdp.discount)


def rollout_horizon(pomdp: FinitePOMDP, tail_tolerance: float = 1e-3) -> int:
    """The first horizon at which the rewards beyond it are worth at most `tail_tolerance` (steps per episode)."""
    require_discount_below_one(pomdp, "rollout_horizon")
    scale = _largest_value(pomdp)
    return max(1, math.ceil(math.log(tail_tolerance / scale) / math.log(pomdp.discount))) if scale > 0 else 1


def rollout_value(
    pomdp: FinitePOMDP,
    policy: Callable[[np.ndarray], int],
    *,
    episodes: int,
    seed: int,
    tail_tolerance: float = 1e-3,
) -> RolloutEstimate:
    """Mean discounted return of `policy` (belief -> action) over `episodes` episodes seeded seed, seed + 1, ...

    The horizon is `rollout_horizon(pomdp, tail_tolerance)`.
    """
    require_discount_below_one(pomdp, "rollout_value")
    horizon = rollout_horizon(pomdp, tail_tolerance)
    scale = _largest_value(pomdp)
    env = POMDPEnv(pomdp, observation="belief", episode_length=horizon)
    returns = np.empty(episodes)
    for episode in range(episodes):
        _, info = env.reset(seed=seed + episode)
        total, weight, truncated = 0.0, 1.0, False
        while not truncated:
            _, reward, _, truncated, info = env.step(policy(info["belief"]))
            total += weight * reward
            weight *= pomdp.discount
        returns[episode] = total
    return RolloutEstimate(
        mean=float(returns.mean()),
        standard_error=float(returns.std(ddof=1) / np.sqrt(episodes)) if episodes > 1 else math.inf,
        tail_bound=pomdp.discount**horizon * scale,
        episodes=episodes,
        horizon=horizon,
    )
