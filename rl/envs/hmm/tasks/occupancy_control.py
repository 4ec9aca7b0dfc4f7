"""Occupancy control: the agent tilts the process toward a state and pays a KL price for it.

    task = OccupancyControl(mess3_process(), target_state=0, tilt_strength=2.0, kl_coefficient=1.0)
    env = HMMEnv(task, episode_length=128)

Action 0 leaves the dynamics passive; action 1 + j multiplies the probability of every
(token, next state j) edge by exp(tilt_strength) and renormalises each row (an exponential tilt,
so emissions given the next state are unchanged). The reward is

    1[next state == target_state] - kl_coefficient * KL(tilted row of the current state || passive row)

with the KL taken over (token, next state) pairs of the hidden state the step starts in.
"""

from __future__ import annotations

import gymnasium
import numpy as np

from rl.envs.hmm.model import FiniteHMM


class OccupancyControl:
    """Reward for occupying `target_state`, minus a KL penalty against the passive dynamics."""

    def __init__(self, model: FiniteHMM, *, target_state: int, tilt_strength: float, kl_coefficient: float):
        if not (isinstance(target_state, (int, np.integer)) and 0 <= target_state < model.num_states):
            raise ValueError(f"target_state={target_state!r}; expected an integer state in [0, {model.num_states})")
        if not np.isfinite(tilt_strength):
            raise ValueError(f"tilt_strength={tilt_strength}; expected a finite log-weight")
        if not (np.isfinite(kl_coefficient) and kl_coefficient >= 0):
            raise ValueError(f"kl_coefficient={kl_coefficient}; expected a finite number >= 0 (it is a penalty)")
        self.model = model
        self.target_state = target_state
        self.kl_coefficient = kl_coefficient
        # log-weights on next states: row 0 passive, row 1 + j favours state j
        log_weights = np.vstack([np.zeros(model.num_states), tilt_strength * np.eye(model.num_states)])
        self.action_space = gymnasium.spaces.Discrete(len(log_weights))
        passive = model.transition_matrices
        self.dynamics = tuple(_tilted(passive, weights) for weights in log_weights)
        # kl[a, i] = KL(row i under action a || passive row i), over (token, next state) pairs
        self.kl = np.array([_row_kl(dynamics.transition_matrices, passive) for dynamics in self.dynamics])

    def reward(self, action, state, token, next_state):
        occupancy = float(next_state == self.target_state)
        kl = float(self.kl[action, state])
        return occupancy - self.kl_coefficient * kl, {"occupancy": occupancy, "kl": kl}


def _tilted(matrices: np.ndarray, log_weights: np.ndarray) -> FiniteHMM:
    weighted = matrices * np.exp(log_weights)[None, None, :]
    return FiniteHMM(weighted / weighted.sum(axis=(0, 2), keepdims=True))


def _row_kl(tilted: np.ndarray, passive: np.ndarray) -> np.ndarray:
    ratio = np.divide(tilted, passive, out=np.ones_like(tilted), where=tilted > 0)
    return (tilted * np.log(ratio)).sum(axis=(0, 2))
