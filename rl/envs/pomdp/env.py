"""POMDPEnv: a Gymnasium env over any FinitePOMDP.

    env = POMDPEnv(load_pomdp("tiger.POMDP"), observation="belief", episode_length=100)
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    info["state"], info["belief"], info["observation"]     # hidden state, exact belief, file symbol

Observation modes:
- "symbol": the file's observation index, Discrete(num_observations + 1); the extra value
  num_observations means "nothing observed yet" and appears only after reset.
- "belief": the exact belief over states (float32 vector); info["belief"] holds it in float64.
- "state": the hidden state (debugging: the problem becomes fully observable).

A step draws s2 ~ T[a, s, :], then o ~ O[a, s2, :], and pays R[a, s, s2, o] as in the model.
The discount is exposed as `env.discount` and never applied. Episodes never terminate; they
truncate after `episode_length` steps.
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium
import numpy as np

from rl.envs import stochastic
from rl.envs.pomdp.model import FinitePOMDP


class POMDPEnv(gymnasium.Env):
    """Simulates a FinitePOMDP and tracks its exact belief; subclasses may add observation modes."""

    metadata: ClassVar[dict] = {"render_modes": []}
    OBSERVATION_MODES: tuple[str, ...] = ("symbol", "belief", "state")

    def __init__(self, pomdp: FinitePOMDP, *, episode_length: int, observation: str = "symbol"):
        if observation not in self.OBSERVATION_MODES:
            raise ValueError(f"observation={observation!r}; choose one of {self.OBSERVATION_MODES}")
        if episode_length < 1:
            raise ValueError(f"episode_length={episode_length}; expected >= 1")
        self.pomdp = pomdp
        self.discount = pomdp.discount
        self._mode = observation
        self._episode_length = episode_length
        self._num_states = pomdp.num_states
        self._rewards = pomdp.rewards
        self._start_sampler = stochastic.RowSampler(pomdp.start[None])
        self._transition_sampler = stochastic.RowSampler(pomdp.transitions)  # row a * S + s
        self._observation_sampler = stochastic.RowSampler(pomdp.observations)  # row a * S + s2
        self.action_space = gymnasium.spaces.Discrete(pomdp.num_actions)
        self.observation_space = self._observation_space(observation)

    def _observation_space(self, mode: str) -> gymnasium.spaces.Space:
        if mode == "symbol":
            return gymnasium.spaces.Discrete(self.pomdp.num_observations + 1)
        if mode == "belief":
            return gymnasium.spaces.Box(0.0, 1.0, shape=(self.pomdp.num_states,), dtype=np.float32)
        return gymnasium.spaces.Discrete(self.pomdp.num_states)

    def _observe(self, mode: str, symbol: int):
        if mode == "symbol":
            return symbol
        if mode == "belief":
            return self._belief.astype(np.float32)
        return self._state

    def predict_belief(self, belief: np.ndarray, action: int) -> np.ndarray:
        """sum_s b(s) T[a, s, :]: the belief after the action, before its observation (dense product)."""
        return belief @ self.pomdp.transitions[action]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = self._start_sampler.sample(0, self.np_random.random())
        self._belief = np.array(self.pomdp.start)
        self._steps = 0
        nothing_observed = self.pomdp.num_observations
        info = {"state": self._state, "belief": self._belief.copy(), "observation": nothing_observed}
        return self._observe(self._mode, nothing_observed), info

    def step(self, action):
        action = int(action)
        if not 0 <= action < self.action_space.n:
            raise ValueError(f"action {action} is outside the action space {self.action_space}")
        num_states, state, rng = self._num_states, self._state, self.np_random
        next_state = self._transition_sampler.sample(action * num_states + state, rng.random())
        symbol = self._observation_sampler.sample(action * num_states + next_state, rng.random())
        reward = float(self._rewards[action, state, next_state, symbol])
        self._belief = self.pomdp.condition_on_observation(self.predict_belief(self._belief, action), action, symbol)
        self._state = next_state
        self._steps += 1
        info = {"state": next_state, "belief": self._belief.copy(), "observation": symbol}
        return self._observe(self._mode, symbol), reward, False, self._steps >= self._episode_length, info
