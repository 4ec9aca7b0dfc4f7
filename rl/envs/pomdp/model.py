"""FinitePOMDP: a validated, immutable finite POMDP with dense arrays.

pomdp = load_pomdp("machine.POMDP")                 # or FinitePOMDP(transitions=..., ...)
pomdp.transitions[a, s, s2]                         # P(s2 | s, a)
pomdp.observations[a, s2, o]                        # P(o | a, s2)
pomdp.rewards[a, s, s2, o]; pomdp.expected_rewards[a, s]
pomdp.reward_table          # the rewards as given: size 1 along axes they do not depend on
belief = pomdp.belief_update(belief, action, observation)
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from rl.envs import stochastic


@dataclasses.dataclass(frozen=True, eq=False)
class FinitePOMDP:
    """A finite POMDP. Rewards are to be maximised (a file's costs arrive negated); the discount is data.

    Names are tuples of strings where the source had them, else None (elements are then numbered).
    Construction copies, validates and freezes every array. `rewards` may be given with size-1
    axes, e.g. (actions, states, 1, 1) for rewards that depend on the action and state only:
    `reward_table` keeps that compact array and `rewards` is a read-only broadcast view of it, so a
    model like TagAvoid (870 states, 30 observations) does not hold an actions x states^2 x
    observations array (900 MB).
    """

    transitions: np.ndarray
    observations: np.ndarray
    rewards: np.ndarray
    start: np.ndarray
    discount: float
    state_names: tuple[str, ...] | None = None
    action_names: tuple[str, ...] | None = None
    observation_names: tuple[str, ...] | None = None

    def __post_init__(self):
        transitions = _frozen_copy(self.transitions)
        observations = _frozen_copy(self.observations)
        start = _frozen_copy(self.start)
        if transitions.ndim != 3 or transitions.shape[1] != transitions.shape[2]:
            raise ValueError(f"transitions has shape {transitions.shape}; expected (actions, states, states)")
        num_actions, num_states, _ = transitions.shape
        if observations.ndim != 3 or observations.shape[:2] != (num_actions, num_states):
            raise ValueError(
                f"observations has shape {observations.shape}; expected ({num_actions}, {num_states}, observations)"
            )
        expected_rewards_shape = (num_actions, num_states, num_states, observations.shape[2])
        reward_table = _frozen_copy(_compact(self.rewards))
        if reward_table.ndim > 4:
            raise ValueError(
                f"rewards has shape {reward_table.shape}; expected at most 4 axes {expected_rewards_shape}"
            )
        reward_table = reward_table.reshape((1,) * (4 - reward_table.ndim) + reward_table.shape)
        try:  # a view: (actions, states, 1, 1) rewards stay small
            rewards = np.broadcast_to(reward_table, expected_rewards_shape)
        except ValueError:
            raise ValueError(
                f"rewards has shape {reward_table.shape}, which does not broadcast to {expected_rewards_shape} "
                "(actions, states, end states, observations); give size 1 along axes the rewards do not depend on"
            ) from None
        if not np.all(np.isfinite(reward_table)):
            raise ValueError("rewards contain a non-finite entry; every reward must be a finite number")
        if start.shape != (num_states,):
            raise ValueError(f"start has shape {start.shape}; expected ({num_states},)")
        if not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"discount={self.discount}; expected a number in [0, 1]")
        for names, count, what in (
            (self.state_names, num_states, "state_names"),
            (self.action_names, num_actions, "action_names"),
            (self.observation_names, observations.shape[2], "observation_names"),
        ):
            if names is not None and len(names) != count:
                raise ValueError(f"{what} has {len(names)} names for {count} elements")
        stochastic.require_stochastic(
            transitions,
            name="transitions",
            sum_axes=(2,),
            describe_row=lambda i: f"{self.label('action', i[0])}, {self.label('state', i[1])}",
        )
        stochastic.require_stochastic(
            observations,
            name="observations",
            sum_axes=(2,),
            describe_row=lambda i: f"{self.label('action', i[0])}, end {self.label('state', i[1])}",
        )
        stochastic.require_stochastic(start, name="start", sum_axes=(0,), describe_row=lambda _: "start")
        frozen = {"transitions": transitions, "observations": observations, "rewards": rewards, "start": start}
        object.__setattr__(self, "reward_table", reward_table)
        for field, value in frozen.items():
            object.__setattr__(self, field, value)
        object.__setattr__(self, "discount", float(self.discount))

    def label(self, kind: str, index: int) -> str:
        """'state 3' or, where names exist, "state 3 ('tiger-left')"; kind is state, action or observation."""
        names = {"state": self.state_names, "action": self.action_names, "observation": self.observation_names}[kind]
        return f"{kind} {index}" + (f" ({names[index]!r})" if names is not None else "")

    @property
    def num_states(self) -> int:
        return self.transitions.shape[1]

    @property
    def num_actions(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_observations(self) -> int:
        return self.observations.shape[2]

    @functools.cached_property
    def expected_rewards(self) -> np.ndarray:
        """expected_rewards[a, s] = sum over s2, o of T[a, s, s2] O[a, s2, o] R[a, s, s2, o].

        Summed over the axes of `reward_table` only, so at most actions x states^2 terms are formed.
        """
        table, observations = self.reward_table, self.observations
        if table.shape[3] == 1:  # rewards independent of the observation: O's rows sum out
            per_end_state = observations.sum(axis=2)[:, None, :] * table[..., 0]
        else:
            per_end_state = (observations[:, None] * table).sum(axis=3)
        expected = (self.transitions * per_end_state).sum(axis=2)
        expected.flags.writeable = False
        return expected

    def belief_update(self, belief: np.ndarray, action: int, observation: int) -> np.ndarray:
        """b'(s2) proportional to O[a, s2, o] * sum_s b(s) T[a, s, s2], for beliefs of shape (..., states)."""
        return self.condition_on_observation(np.asarray(belief) @ self.transitions[action], action, observation)

    def condition_on_observation(self, predicted: np.ndarray, action: int, observation: int) -> np.ndarray:
        """The evidence step alone: predicted(s2) * O[a, s2, o], renormalised.

        Raises ValueError when the observation is impossible under the predicted belief.
        """
        return stochastic.normalize(
            predicted * self.observations[action, :, observation],
            impossible=lambda index: f"observation {observation} after action {action} (batch index {index})",
        )


def _compact(array):
    """A broadcast view (e.g. another model's `rewards`) shrunk to size 1 along its zero-stride axes, else as given."""
    if not isinstance(array, np.ndarray) or 0 not in array.strides:
        return array
    return array[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in array.strides)]


def _frozen_copy(array) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.flags.writeable = False
    return array
