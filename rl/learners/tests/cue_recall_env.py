"""CueRecall: a memory task for tests (rl/learners may not import rl.envs).

    env = CueRecallEnv({"n_cues": 4, "delay": 8})

The first observation shows one of `n_cues` cues; the next `delay - 1` are blank;
the one after that raises a query flag, and the action taken then ends the episode
with reward 1 if it names the cue, else 0. A memoryless policy earns 1 / n_cues in
expectation; one that remembers `delay` steps back earns 1.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CueRecallEnv(gym.Env):
    """Observation: one-hot cue (n_cues) followed by the query flag. Action: the reported cue."""

    def __init__(self, config: dict[str, Any] | None = None):
        config = dict(config or {})
        self.n_cues = int(config.pop("n_cues", 4))
        self.delay = int(config.pop("delay", 8))
        if config:
            raise ValueError(f"CueRecallEnv got unknown config keys {sorted(config)}; it reads n_cues and delay.")
        if self.n_cues < 2 or self.delay < 1:
            raise ValueError(f"CueRecallEnv needs n_cues >= 2 and delay >= 1, got {self.n_cues}, {self.delay}.")
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n_cues + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(self.n_cues)
        self._cue = 0
        self._steps = 0

    def _observation(self, *, cue: bool = False, query: bool = False) -> np.ndarray:
        obs = np.zeros(self.n_cues + 1, dtype=np.float32)
        if cue:
            obs[self._cue] = 1.0
        obs[-1] = float(query)
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(self.n_cues))
        self._steps = 0
        return self._observation(cue=True), {}

    def step(self, action):
        if self._steps == self.delay:
            return self._observation(), float(int(action) == self._cue), True, False, {}
        self._steps += 1
        return self._observation(query=self._steps == self.delay), 0.0, False, False, {}
