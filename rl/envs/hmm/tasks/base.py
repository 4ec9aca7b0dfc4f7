"""The task protocol: what an HMMEnv's actions mean and what they earn.

A task owns the action space, the dynamics each action selects (one FiniteHMM per action; a
passive task repeats the model) and the reward. New objectives are new task files in this
folder, never branches inside HMMEnv.

    class MyTask:
        def __init__(self, model):
            self.model = model
            self.action_space = gymnasium.spaces.Discrete(2)
            self.dynamics = (model, model)
        def reward(self, action, state, token, next_state):
            return float(token == 0), {"token_zero": float(token == 0)}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import gymnasium

from rl.envs.hmm.model import FiniteHMM


class Task(Protocol):
    """Action and reward semantics of an HMMEnv.

    `model` is the passive process (its stationary distribution is the default prior);
    `dynamics[a]` is the process while action a is applied; `reward` sees the hidden state the
    step started in, the emitted token and the state it ended in, and returns the reward with
    its named components (they go to `info["reward_components"]`).
    """

    model: FiniteHMM
    action_space: gymnasium.spaces.Discrete
    dynamics: tuple[FiniteHMM, ...]

    def reward(self, action: int, state: int, token: int, next_state: int) -> tuple[float, Mapping[str, float]]: ...
