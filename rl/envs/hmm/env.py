"""HMMEnv: a Gymnasium env over a finite HMM whose actions and rewards come from a task.

    env = HMMEnv(OccupancyControl(mess3_process(), target_state=0, tilt_strength=2.0, kl_coefficient=1.0),
                 episode_length=128, observation=("tokens", "previous_action"), history_length=4)
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
    info["belief"], info["state"], info["token"], info["reward_components"]

The observation is one float32 vector: the chosen parts concatenated in the order given
(`env.observation_slices[part]` says where each lies):

- "tokens": one-hots of the last `history_length` tokens, oldest first, most recent last; slots
  before the first token are all zero.
- "previous_action": one-hot of the previous action (all zero after reset).
- "belief": the exact filtered belief over the current hidden state.
- "state": one-hot of the hidden state (for debugging; it makes the task fully observable).

A step from hidden state i under action a draws (token k, next state j) from the task's
dynamics[a], so the token is emitted on the edge; the belief is filtered with the same dynamics.
Episodes never terminate; they truncate after `episode_length` steps.
"""

from __future__ import annotations

import collections
from typing import ClassVar

import gymnasium
import numpy as np

from rl.envs import stochastic
from rl.envs.hmm.belief import belief_step, start_belief
from rl.envs.hmm.tasks.base import Task

OBSERVATION_PARTS = ("tokens", "previous_action", "belief", "state")


class HMMEnv(gymnasium.Env):
    """A finite HMM as an RL environment; see the module docstring for observations and dynamics."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(
        self,
        task: Task,
        *,
        episode_length: int,
        observation: tuple[str, ...] = ("tokens",),
        history_length: int = 1,
        prior: np.ndarray | None = None,
    ):
        model = task.model
        num_actions = task.action_space.n
        if len(task.dynamics) != num_actions:
            raise ValueError(
                f"task has {len(task.dynamics)} dynamics for {num_actions} actions; expected one per action"
            )
        for dynamics in task.dynamics:
            if dynamics.transition_matrices.shape != model.transition_matrices.shape:
                raise ValueError(
                    f"task dynamics have shape {dynamics.transition_matrices.shape}; every action's dynamics must "
                    f"have the model's shape {model.transition_matrices.shape}"
                )
        if episode_length < 1:
            raise ValueError(f"episode_length={episode_length}; expected >= 1")
        if history_length < 1:
            raise ValueError(f"history_length={history_length}; expected >= 1")
        unknown = [part for part in observation if part not in OBSERVATION_PARTS]
        if unknown or not observation or len(set(observation)) != len(observation):
            raise ValueError(f"observation={observation!r}; choose distinct parts from {OBSERVATION_PARTS}")
        prior = start_belief(model, prior)

        self._task = task
        self._num_states = model.num_states
        self._num_tokens = model.num_tokens
        self._episode_length = episode_length
        self._prior = prior
        self._prior_sampler = stochastic.RowSampler(prior[None])
        # row a * num_states + i: P(token k, next state j | state i) under action a, at column k * num_states + j
        self._step_sampler = stochastic.RowSampler(np.concatenate([d.joint_rows for d in task.dynamics]))
        sizes = {
            "tokens": history_length * model.num_tokens,
            "previous_action": num_actions,
            "belief": model.num_states,
            "state": model.num_states,
        }
        self.observation_slices: dict[str, slice] = {}
        start = 0
        for part in observation:
            self.observation_slices[part] = slice(start, start + sizes[part])
            start += sizes[part]
        self._parts = tuple((part, self.observation_slices[part]) for part in observation)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, shape=(start,), dtype=np.float32)
        self.action_space = task.action_space
        self._tokens: collections.deque[int] = collections.deque(maxlen=history_length)

    @property
    def task(self) -> Task:
        return self._task

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = self._prior_sampler.sample(0, self.np_random.random())
        self._belief = self._prior.copy()
        self._tokens.clear()
        self._previous_action = None
        self._steps = 0
        return self._observation(), {"state": self._state, "belief": self._belief.copy()}

    def step(self, action):
        action = int(action)
        if not 0 <= action < self.action_space.n:
            raise ValueError(f"action {action} is outside the action space {self.action_space}")
        state = self._state
        token, next_state = divmod(
            self._step_sampler.sample(action * self._num_states + state, self.np_random.random()), self._num_states
        )
        reward, components = self._task.reward(action, state, token, next_state)
        self._belief = belief_step(self._task.dynamics[action], self._belief, token)
        self._state = next_state
        self._tokens.append(token)
        self._previous_action = action
        self._steps += 1
        info = {
            "state": next_state,
            "token": token,
            "belief": self._belief.copy(),
            "reward_components": dict(components),
        }
        return self._observation(), float(reward), False, self._steps >= self._episode_length, info

    def _observation(self) -> np.ndarray:
        observation = np.zeros(self.observation_space.shape, dtype=np.float32)
        for part, where in self._parts:
            if part == "tokens":
                first_slot = self._tokens.maxlen - len(self._tokens)
                for slot, token in enumerate(self._tokens, start=first_slot):
                    observation[where.start + slot * self._num_tokens + token] = 1.0
            elif part == "previous_action":
                if self._previous_action is not None:
                    observation[where.start + self._previous_action] = 1.0
            elif part == "belief":
                observation[where] = self._belief
            else:  # "state"
                observation[where.start + self._state] = 1.0
        return observation
