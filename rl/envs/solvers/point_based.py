"""A point-based POMDP solver: PBVI backups on a belief set, with policies kept as exactly evaluated controllers.

    solution = solve_point_based(pomdp, num_beliefs=100, seed=0)
    solution.start_value                # exact value of the returned controller at pomdp.start
    action = solution.action(belief)    # greedy on the alpha vectors: a policy over beliefs

Plain point-based value iteration gains about a factor `discount` per iteration, far too
slowly at discount 0.999. Here every alpha vector is the exact value of a node of a
finite-state controller (a policy graph), in the spirit of point-based policy iteration (Ji et
al., AAAI 2007):

1. The belief set holds the beliefs met along trajectories from the start belief under the
   current policy (QMDP in the first round), with probability `exploration` of a random action,
   keeping beliefs at least `min_distance` apart (L1), up to `num_beliefs` of them.
2. The first controller projects the QMDP policy onto the belief set: one node per belief,
   acting as QMDP does there and moving, after each observation, to the node of the belief
   nearest (Euclidean) to the updated belief.
3. Each iteration backs up every belief (PBVI) against the current alpha vectors. That gives
   one-step nodes (the backed-up vectors, linked into the controller) and a greedy action per
   belief, whose projection as in step 2 is a new closed controller. Both are evaluated exactly
   and joined to the controller; nodes best at no belief, and not reachable from one that is,
   are dropped. So the value at every belief of the set never decreases, and every value is
   achieved by an executable controller (a lower bound on the optimum).
4. A round ends when no belief gains more than `tolerance`; the next round collects a fresh
   belief set under the improved greedy policy.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rl.envs.pomdp.model import FinitePOMDP
from rl.envs.solvers.controllers import ControllerEvaluator, FiniteStateController
from rl.envs.solvers.mdp import qmdp, require_discount_below_one


@dataclasses.dataclass(frozen=True, eq=False)
class PointBasedSolution:
    """A policy over beliefs: alpha_vectors[n] is the exact value of controller node n."""

    controller: FiniteStateController
    alpha_vectors: np.ndarray
    beliefs: np.ndarray
    start_value: float
    iterations: int

    def value(self, belief: np.ndarray) -> float:
        """max_n b . alpha_n: what the controller achieves from this belief (a lower bound on the optimum)."""
        return float(np.max(self.alpha_vectors @ belief))

    def action(self, belief: np.ndarray) -> int:
        """The action of the best node at this belief."""
        return int(self.controller.actions[np.argmax(self.alpha_vectors @ belief)])


def solve_point_based(
    pomdp: FinitePOMDP,
    *,
    num_beliefs: int = 100,
    rounds: int = 3,
    max_iterations: int = 10,
    tolerance: float = 0.01,
    trajectory_length: int = 300,
    exploration: float = 0.05,
    min_distance: float = 0.01,
    seed: int = 0,
) -> PointBasedSolution:
    """Solves `pomdp` approximately (the module docstring describes the method).

    num_beliefs, trajectory_length, exploration and min_distance shape each belief set (step 1);
    `rounds` belief sets are collected in turn (step 4); each round runs at most `max_iterations`
    improvement steps, ending early when no belief gains more than `tolerance` (in reward units).
    `seed` drives all randomness. Raises ValueError for discount 1.
    """
    require_discount_below_one(pomdp, "solve_point_based")
    if num_beliefs < 1 or rounds < 1 or max_iterations < 1:
        raise ValueError(
            f"num_beliefs={num_beliefs}, rounds={rounds}, max_iterations={max_iterations}: each must be >= 1"
        )
    rng = np.random.default_rng(seed)
    evaluate = ControllerEvaluator(pomdp)
    policy = qmdp(pomdp).action
    controller = alphas = None
    iterations = 0
    for _ in range(rounds):
        beliefs = _collect_beliefs(pomdp, policy, num_beliefs, trajectory_length, exploration, min_distance, rng)
        if controller is None:
            controller = project_policy(pomdp, beliefs, np.array([policy(belief) for belief in beliefs]))
            alphas = evaluate(controller)
        backups = _Backups(pomdp, beliefs)
        for _ in range(max_iterations):
            controller, alphas, gain = _improve(pomdp, backups, controller, alphas, evaluate)
            iterations += 1
            if gain < tolerance:
                break
        solution = PointBasedSolution(
            controller=controller,
            alpha_vectors=alphas,
            beliefs=beliefs,
            start_value=float((alphas @ pomdp.start).max()),
            iterations=iterations,
        )
        policy = solution.action
    return solution


def project_policy(pomdp: FinitePOMDP, beliefs: np.ndarray, actions: np.ndarray) -> FiniteStateController:
    """The controller with one node per belief: node i takes actions[i] and, after observation o, moves
    to the node of the belief nearest (Euclidean) to the updated belief. Impossible observations
    lead to node 0."""
    successors = np.zeros((len(beliefs), pomdp.num_observations), dtype=np.int64)
    squared_norms = (beliefs**2).sum(axis=1)
    for action in np.unique(actions):
        nodes = np.flatnonzero(actions == action)
        predicted = beliefs[nodes] @ pomdp.transitions[action]
        for observation in range(pomdp.num_observations):
            unnormalized = predicted * pomdp.observations[action, :, observation]
            totals = unnormalized.sum(axis=1)
            possible = totals > 0
            updated = unnormalized[possible] / totals[possible, None]
            distances = squared_norms[None, :] - 2.0 * updated @ beliefs.T  # + |updated|^2, the same per row
            successors[nodes[possible], observation] = distances.argmin(axis=1)
    return FiniteStateController(actions, successors)


def _collect_beliefs(pomdp, policy, num_beliefs, trajectory_length, exploration, min_distance, rng) -> np.ndarray:
    """The start belief, then beliefs met by following `policy` (with exploration) from it.

    Gives up after 100 steps per wanted belief: a small problem may have fewer distinct beliefs.
    """
    beliefs = np.empty((num_beliefs, pomdp.num_states))
    beliefs[0] = pomdp.start
    count, steps = 1, 0
    while count < num_beliefs and steps < 100 * num_beliefs:
        belief = pomdp.start
        for _ in range(trajectory_length):
            steps += 1
            action = int(rng.integers(pomdp.num_actions)) if rng.random() < exploration else policy(belief)
            predicted = belief @ pomdp.transitions[action]
            observation_probabilities = predicted @ pomdp.observations[action]
            observation_probabilities /= observation_probabilities.sum()
            observation = rng.choice(pomdp.num_observations, p=observation_probabilities)
            belief = pomdp.condition_on_observation(predicted, action, observation)
            if np.abs(beliefs[:count] - belief).sum(axis=1).min() > min_distance:
                beliefs[count] = belief
                count += 1
                if count == num_beliefs:
                    break
    return beliefs[:count]


class _Backups:
    """What the point backups need about a fixed belief set, computed once per set."""

    def __init__(self, pomdp: FinitePOMDP, beliefs: np.ndarray):
        self.beliefs = beliefs
        possible = pomdp.observations.max(axis=1) > 0  # (actions, observations)
        self.pair_action, pair_observation = np.nonzero(possible)
        self.pair_index = np.full(possible.shape, -1)
        self.pair_index[possible] = np.arange(possible.sum())
        predicted = np.stack([beliefs @ pomdp.transitions[action] for action in range(pomdp.num_actions)])
        # successors[p, b]: unnormalised belief after (action, observation) pair p from belief b
        likelihoods = pomdp.observations[self.pair_action, :, pair_observation]
        self.successors = predicted[self.pair_action] * likelihoods[:, None, :]
        self.immediate = beliefs @ pomdp.expected_rewards.T  # (beliefs, actions)


def _improve(pomdp, backups: _Backups, controller, alphas, evaluate):
    """One improvement step (module docstring, step 3); returns the new controller, its values and the gain."""
    discount = pomdp.discount
    beliefs = backups.beliefs
    num_beliefs = len(beliefs)
    old_values = (beliefs @ alphas.T).max(axis=1)
    scores = backups.successors @ alphas.T  # (pairs, beliefs, nodes)
    best_node, best_score = scores.argmax(axis=2), scores.max(axis=2)
    q_values = backups.immediate.copy()
    np.add.at(q_values.T, backups.pair_action, discount * best_score)
    actions = q_values.argmax(axis=1)
    pairs = backups.pair_index[actions]  # (beliefs, observations); -1 where impossible
    one_step_successors = np.where(pairs >= 0, best_node[np.maximum(pairs, 0), np.arange(num_beliefs)[:, None]], 0)
    # one-step vectors: R[a] + discount * T[a] @ sum_o O[a, :, o] * alpha[succ(o)]
    future = np.einsum("bso,bos->bs", pomdp.observations[actions], alphas[one_step_successors])
    one_step = np.empty((num_beliefs, pomdp.num_states))
    for action in np.unique(actions):
        chosen = actions == action
        one_step[chosen] = pomdp.expected_rewards[action] + discount * future[chosen] @ pomdp.transitions[action].T
    greedy = project_policy(pomdp, beliefs, actions)
    offset = controller.num_nodes + num_beliefs
    joined = FiniteStateController(
        np.concatenate([controller.actions, actions, greedy.actions]),
        np.concatenate([controller.successors, one_step_successors, greedy.successors + offset]),
    )
    joined_alphas = np.concatenate([alphas, one_step, evaluate(greedy)])
    values = beliefs @ joined_alphas.T
    keep = _reachable(pomdp, joined, np.unique(values.argmax(axis=1)))
    return _restrict(joined, keep), joined_alphas[keep], float((values.max(axis=1) - old_values).max())


def _reachable(pomdp, controller, nodes) -> np.ndarray:
    """`nodes` and every node reachable from them through observations possible after their actions."""
    possible = pomdp.observations.max(axis=1) > 0
    keep = np.zeros(controller.num_nodes, dtype=bool)
    frontier = list(nodes)
    while frontier:
        node = frontier.pop()
        if not keep[node]:
            keep[node] = True
            frontier.extend(controller.successors[node, possible[controller.actions[node]]].tolist())
    return np.flatnonzero(keep)


def _restrict(controller, keep) -> FiniteStateController:
    """The sub-controller of the nodes in `keep` (closed under possible successors), renumbered."""
    index = np.zeros(controller.num_nodes, dtype=np.int64)
    index[keep] = np.arange(len(keep))
    return FiniteStateController(controller.actions[keep], index[controller.successors[keep]])
