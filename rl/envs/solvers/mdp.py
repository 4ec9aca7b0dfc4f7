"""Fully observable bounds for a FinitePOMDP: the MDP optimum and QMDP.

mdp = solve_fully_observable(pomdp)
mdp.value(pomdp.start)              # an upper bound on the POMDP's optimal value
policy = qmdp(pomdp)
policy.action(belief), policy.value(belief)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rl.envs.pomdp.model import FinitePOMDP


@dataclasses.dataclass(frozen=True, eq=False)
class MDPSolution:
    """Optimal values of the MDP that sees the state: values (S,), q_values (A, S), policy (S,)."""

    values: np.ndarray
    q_values: np.ndarray
    policy: np.ndarray

    def value(self, belief: np.ndarray) -> float:
        """sum_s b(s) V*(s): what knowing the state from now on would be worth (a POMDP upper bound)."""
        return float(np.asarray(belief) @ self.values)


def require_discount_below_one(pomdp: FinitePOMDP, solver: str) -> None:
    """The one error every solver here gives for discount 1 (their infinite-horizon values may be infinite)."""
    if pomdp.discount >= 1.0:
        raise ValueError(
            f"{solver} needs discount < 1, but the POMDP has discount {pomdp.discount:g}: its infinite-horizon "
            "values may be infinite, and these solvers take no finite horizon. Solve a discounted version instead, "
            "e.g. dataclasses.replace(pomdp, discount=0.99)"
        )


def solve_fully_observable(pomdp: FinitePOMDP, *, max_iterations: int = 1000) -> MDPSolution:
    """Policy iteration with exact linear solves (a few iterations even at discount 0.999).

    Raises ValueError for discount 1 (values may be infinite) or if the policy still changes
    after max_iterations (which for a finite MDP means max_iterations was set too low).
    """
    require_discount_below_one(pomdp, "solve_fully_observable")
    states = np.arange(pomdp.num_states)
    rewards = pomdp.expected_rewards
    policy = rewards.argmax(axis=0)
    for _ in range(max_iterations):
        values = np.linalg.solve(
            np.eye(pomdp.num_states) - pomdp.discount * pomdp.transitions[policy, states], rewards[policy, states]
        )
        q_values = rewards + pomdp.discount * pomdp.transitions @ values
        # keep the current action unless another is better by more than round-off (avoids cycling on ties)
        improvable = q_values.max(axis=0) > q_values[policy, states] + 1e-9 * (1.0 + np.abs(values))
        if not improvable.any():
            return MDPSolution(values=values, q_values=q_values, policy=policy)
        policy = np.where(improvable, q_values.argmax(axis=0), policy)
    raise ValueError(f"policy iteration did not converge in {max_iterations} iterations; raise max_iterations")


@dataclasses.dataclass(frozen=True, eq=False)
class QMDPPolicy:
    """Acts greedily on sum_s b(s) Q*(s, a), as if the state became known after one step."""

    q_values: np.ndarray

    def action(self, belief: np.ndarray) -> int:
        return int(np.argmax(self.q_values @ belief))

    def value(self, belief: np.ndarray) -> float:
        """max_a sum_s b(s) Q*(s, a): an upper bound on the optimal POMDP value at the belief."""
        return float(np.max(self.q_values @ belief))


def qmdp(pomdp: FinitePOMDP) -> QMDPPolicy:
    """The QMDP policy from the fully observable Q-values."""
    return QMDPPolicy(q_values=solve_fully_observable(pomdp).q_values)
