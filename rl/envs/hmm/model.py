"""A validated, immutable finite hidden Markov process in edge-emitting form.

model = FiniteHMM(transition_matrices)           # T[k, i, j] = P(token k, next state j | state i)
model = FiniteHMM.from_state_emitting(transition, emission, emitted_by="destination")
model.stationary_distribution()                   # (num_states,)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import numpy as np

from rl.envs import stochastic


@dataclasses.dataclass(frozen=True, eq=False)
class FiniteHMM:
    """A finite HMM: `transition_matrices[k, i, j] = P(token k, next state j | state i)`.

    Construction copies the array, validates it (finite, nonnegative, every state's outgoing
    row summing to one over tokens and next states) and freezes it.

        mess3 = FiniteHMM(np.stack([...]))   # shape (num_tokens, num_states, num_states)
        mess3.state_transition_matrix       # P(next state j | state i), summed over tokens
    """

    transition_matrices: np.ndarray

    def __post_init__(self):
        matrices = np.array(self.transition_matrices, dtype=np.float64)
        if matrices.ndim != 3 or matrices.shape[1] != matrices.shape[2] or 0 in matrices.shape:
            raise ValueError(
                f"transition_matrices has shape {matrices.shape}; expected (num_tokens, num_states, num_states) "
                "with T[k, i, j] = P(token k, next state j | state i)"
            )
        stochastic.require_stochastic(
            matrices,
            name="transition_matrices",
            sum_axes=(0, 2),
            describe_row=lambda index: f"of state {index[0]} (summed over tokens and next states)",
        )
        matrices.flags.writeable = False
        object.__setattr__(self, "transition_matrices", matrices)

    @classmethod
    def from_state_emitting(
        cls,
        transition: np.ndarray,
        emission: np.ndarray,
        *,
        emitted_by: Literal["source", "destination"],
    ) -> FiniteHMM:
        """Converts a state-emitting HMM (transition[i, j], emission[state, token]) to edge-emitting form.

        `emitted_by="source"`: the current state emits, then the chain moves (Rabiner's convention):
        T[k, i, j] = emission[i, k] * transition[i, j].
        `emitted_by="destination"`: the chain moves, then the new state emits (Mess3's convention):
        T[k, i, j] = transition[i, j] * emission[j, k].
        """
        transition = np.asarray(transition, dtype=np.float64)
        emission = np.asarray(emission, dtype=np.float64)
        if transition.ndim != 2 or transition.shape[0] != transition.shape[1]:
            raise ValueError(f"transition has shape {transition.shape}; expected (num_states, num_states)")
        if emission.ndim != 2 or emission.shape[0] != transition.shape[0]:
            raise ValueError(
                f"emission has shape {emission.shape}; expected (num_states={transition.shape[0]}, num_tokens)"
            )
        stochastic.require_stochastic(transition, name="transition", sum_axes=(1,))
        stochastic.require_stochastic(emission, name="emission", sum_axes=(1,))
        if emitted_by == "source":
            matrices = emission.T[:, :, None] * transition[None, :, :]
        elif emitted_by == "destination":
            matrices = transition[None, :, :] * emission.T[:, None, :]
        else:
            raise ValueError(f"emitted_by={emitted_by!r}; expected 'source' or 'destination'")
        return cls(matrices)

    @property
    def num_tokens(self) -> int:
        return self.transition_matrices.shape[0]

    @property
    def num_states(self) -> int:
        return self.transition_matrices.shape[1]

    @functools.cached_property
    def state_transition_matrix(self) -> np.ndarray:
        """P(next state j | state i), the token-marginal chain."""
        return _frozen(self.transition_matrices.sum(axis=0))

    @functools.cached_property
    def joint_rows(self) -> np.ndarray:
        """(num_states, num_tokens * num_states): row i is P(token k, next state j | i) at column k * num_states + j."""
        return _frozen(self.transition_matrices.transpose(1, 0, 2).reshape(self.num_states, -1))

    def stationary_distribution(self) -> np.ndarray:
        """The unique pi with pi = pi P for the token-marginal chain P.

        Raises ValueError for a reducible chain with several closed classes (no unique answer):
        pass an explicit prior wherever one is accepted instead.
        """
        # P's entries are probabilities, so P^T - I has a fixed scale (norm <= 1 + sqrt(n)): its zero
        # singular values sit at round-off (~1e-16) and the others at the chain's mixing rates. An
        # absolute cutoff keeps slowly mixing chains (Mess3 at x = 0.02: 0.06), which a cutoff
        # relative to the largest singular value loses.
        _, singular_values, right = np.linalg.svd(self.state_transition_matrix.T - np.eye(self.num_states))
        kernel = right[singular_values <= _NULL_SINGULAR_VALUE].T
        if kernel.shape[1] != 1:
            raise ValueError(
                f"the state chain has {kernel.shape[1]} independent stationary distributions (it is reducible); "
                "pass an explicit prior"
            )
        # The null-space vector has an arbitrary sign and round-off-sized negative entries.
        distribution = np.clip(kernel[:, 0] / kernel[:, 0].sum(), 0.0, None)
        return distribution / distribution.sum()


_NULL_SINGULAR_VALUE = 1e-10  # mixing slower than this per step reads as a reducible chain


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
