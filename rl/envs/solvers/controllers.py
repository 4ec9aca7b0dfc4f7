"""Finite-state controllers (policy graphs) for a FinitePOMDP and their exact values.

    controller = FiniteStateController(actions=[0], successors=np.zeros((1, 16), int))  # always act 0
    values = evaluate_controller(pomdp, controller)      # values[n, s]: start in node n, state s
    start_value = (values @ pomdp.start).max()

Node n takes action actions[n]; after observation o the controller moves to successors[n, o].
Each row of `values` is an alpha vector, and max_n b . values[n] is a lower bound on the
optimal value at belief b (the controller is a policy achieving it).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from rl.envs.pomdp.model import FinitePOMDP
from rl.envs.solvers.mdp import require_discount_below_one


@dataclasses.dataclass(frozen=True, eq=False)
class FiniteStateController:
    """A deterministic policy graph: actions (nodes,) and successors (nodes, observations)."""

    actions: np.ndarray
    successors: np.ndarray

    def __post_init__(self):
        actions = np.array(self.actions, dtype=np.int64)
        successors = np.array(self.successors, dtype=np.int64)
        if actions.ndim != 1 or successors.ndim != 2 or successors.shape[0] != actions.shape[0]:
            raise ValueError(
                f"actions {actions.shape} and successors {successors.shape}: "
                "expected (nodes,) and (nodes, observations)"
            )
        if successors.size and (successors.min() < 0 or successors.max() >= len(actions)):
            raise ValueError(f"successors must be node indices in [0, {len(actions)})")
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "successors", successors)

    @property
    def num_nodes(self) -> int:
        return len(self.actions)


def evaluate_controller(pomdp: FinitePOMDP, controller: FiniteStateController) -> np.ndarray:
    """V[n, s] = R[a_n, s] + discount * sum_{s2, o} T[a_n, s, s2] O[a_n, s2, o] V[succ(n, o), s2].

    See ControllerEvaluator, which also serves repeated evaluations on one POMDP.
    """
    return ControllerEvaluator(pomdp)(controller)


class ControllerEvaluator:
    """Exact controller values on one POMDP: one sparse linear system over (node, state) pairs.

    The sparse T[a] * O[a, :, o] blocks are built once. The system I - discount * P is solved by
    BiCGSTAB to a relative residual of 1e-12 (several times faster than a sparse LU here), with
    a direct solve if BiCGSTAB does not converge. Needs discount < 1.

        evaluate = ControllerEvaluator(pomdp)
        values = evaluate(controller)
    """

    def __init__(self, pomdp: FinitePOMDP):
        require_discount_below_one(pomdp, "ControllerEvaluator")
        self._pomdp = pomdp
        self._blocks = {}
        for action in range(pomdp.num_actions):
            for observation in range(pomdp.num_observations):
                # block[s, s2] = T[a, s, s2] * O[a, s2, o]
                block = scipy.sparse.coo_matrix(pomdp.transitions[action] * pomdp.observations[action, :, observation])
                if block.nnz:
                    self._blocks[action, observation] = block

    def __call__(self, controller: FiniteStateController) -> np.ndarray:
        pomdp = self._pomdp
        if controller.successors.shape[1] != pomdp.num_observations:
            raise ValueError(
                f"controller has successors for {controller.successors.shape[1]} observations; the POMDP has "
                f"{pomdp.num_observations}"
            )
        num_states = pomdp.num_states
        rows, columns, probabilities = [], [], []
        for (action, observation), block in self._blocks.items():
            nodes = np.flatnonzero(controller.actions == action)
            targets = controller.successors[nodes, observation]
            rows.append((nodes[:, None] * num_states + block.row[None, :]).ravel())
            columns.append((targets[:, None] * num_states + block.col[None, :]).ravel())
            probabilities.append(np.tile(block.data, len(nodes)))
        size = controller.num_nodes * num_states
        dynamics = scipy.sparse.csr_matrix(
            (np.concatenate(probabilities), (np.concatenate(rows), np.concatenate(columns))), shape=(size, size)
        )
        system = scipy.sparse.identity(size, format="csr") - pomdp.discount * dynamics
        rewards = pomdp.expected_rewards[controller.actions].ravel()
        values, status = scipy.sparse.linalg.bicgstab(system, rewards, rtol=1e-12, maxiter=10 * size)
        if status != 0:
            values = scipy.sparse.linalg.spsolve(system.tocsc(), rewards)
        return values.reshape(controller.num_nodes, num_states)
