"""TokenTransition: an env whose infos carry a hidden state and the token each step emits (rl.envs' HMMEnv keys).

    env = TokenTransitionEnv({"num_states": 3, "episode_length": 20})

The observation is the one-hot of the hidden state s. Action a in {0, 1} emits token
k = (s + a) % num_states and moves to state (k + 1) % num_states. reset returns
`info["state"]`; step returns `info["state"]` (the new state) and `info["token"]` (the token
that step emitted). So batch step t (observation t, action t) has the state target
argmax(observation t) and the next-token target (argmax(observation t) + action t) % num_states,
which tests compute without reading the infos. Episodes truncate after `episode_length` steps.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class TokenTransitionEnv(gym.Env):
    """Observation: one-hot hidden state. Action: 0 or 1, added to the state to give the emitted token."""

    def __init__(self, config: dict[str, Any] | None = None):
        config = dict(config or {})
        self.num_states = int(config.pop("num_states", 3))
        self.episode_length = int(config.pop("episode_length", 20))
        if config:
            raise ValueError(
                f"TokenTransitionEnv got unknown config keys {sorted(config)}; it reads num_states and episode_length."
            )
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.num_states,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._state = 0
        self._steps = 0

    def _observation(self) -> np.ndarray:
        return np.eye(self.num_states, dtype=np.float32)[self._state]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = int(self.np_random.integers(self.num_states))
        self._steps = 0
        return self._observation(), {"state": self._state}

    def step(self, action):
        token = (self._state + int(action)) % self.num_states
        self._state = (token + 1) % self.num_states
        self._steps += 1
        truncated = self._steps >= self.episode_length
        return self._observation(), 0.0, False, truncated, {"state": self._state, "token": token}
