"""Reference values for a controlled finite HMM: what the best policy of each kind earns in HMMEnv.

    task = mess3_env("control").task                      # any HMMEnv task on a FiniteHMM
    references = control_references(task, horizon=64, gamma=0.9)
    references.belief_optimal.value                       # within error_bound of the agent's optimum
    references.memoryless.policy.action(token, previous_action)
    print(references.table())                             # every reference, both criteria, seconds

The criterion is that of an HMMEnv episode of `horizon` steps from the env's reset
distribution (`prior`, the stationary distribution by default): E[sum_{t < horizon} gamma^t r_t].
Every policy is the best of its class for that criterion; each reference also reports the same
policy's undiscounted episode return E[sum_t r_t] (RLlib's episode_return_mean). gamma = 1 asks
for the policies that maximise the episode return itself. The rewards are read from
`task.reward` on every (action, state, token, next state), never re-derived.

The references, from the most informed policy class to the least:

- fully_observed: sees the hidden state. Backward induction over states: an upper bound on
  anything the agent can do.
- belief_optimal: sees what the agent sees, all of it (every token and its own actions, so the
  exact belief). Value iteration on a Freudenthal grid of the belief simplex (Lovejoy 1991):
  interpolating the convex value function over-estimates it, so the grid value `upper_bound`
  is an upper bound on the optimum. `policy` is executable from the agent's observations (a
  finite-state controller over grid points, see GridBeliefController) and `value` is its exact
  value, a lower bound. The optimum lies in [value, upper_bound]; error_bound is the width.
  The grid is refined until error_bound <= value_tolerance.
- memoryless: sees only the last token and its previous action (HMMEnv's observation
  ("tokens", "previous_action") with history 1): the best deterministic stationary map from
  that observation to an action, evaluated exactly. Exhaustive search when there are at most
  65536 such maps, so the best one; else coordinate ascent from many starts, so the best local
  optimum found (no single observation's action can be changed for the better) and a lower
  bound on the best map. Stochastic memoryless policies can do better than every deterministic
  one; they are not searched.
- open_loop: the best constant action, evaluated exactly.
- passive: always `passive_action` (whose dynamics must be the passive model), evaluated exactly.

Cost: the grid has C(N + S - 1, S - 1) points for resolution N on S states, each backed up
for every action and token at every step; for Mess3 (S = 3) at CONTROL_DEFAULTS the whole call
takes about 2 s (grid resolution 128 and the memoryless search about 1 s each).
"""

from __future__ import annotations

import dataclasses
import itertools
import time

import gymnasium
import numpy as np

from rl.envs.hmm.belief import start_belief
from rl.envs.hmm.model import FiniteHMM
from rl.envs.solvers.simplex_grid import SimplexGrid

# Exhaustive memoryless search up to this many deterministic maps (Mess3 has 4^13, too many).
EXHAUSTIVE_MEMORYLESS_LIMIT = 65536
# The belief grid's first resolution when it is refined automatically (then doubled).
FIRST_GRID_RESOLUTION = 16


@dataclasses.dataclass(frozen=True, eq=False)
class StatePolicy:
    """A time-dependent policy of the hidden state: actions[step, state]."""

    actions: np.ndarray

    def action(self, step: int, state: int) -> int:
        return int(self.actions[step, state])


@dataclasses.dataclass(frozen=True, eq=False)
class MemorylessPolicy:
    """A stationary policy of the last token and the previous action (nothing on the first step).

    actions[0] is the first step's action; actions[1 + previous_action * num_tokens + token] the others.
    """

    actions: np.ndarray
    num_tokens: int

    def action(self, token: int | None, previous_action: int | None) -> int:
        if token is None:
            return int(self.actions[0])
        return int(self.actions[1 + previous_action * self.num_tokens + token])


class GridBeliefController:
    """The belief-optimal reference's policy: a finite-state controller whose nodes are grid beliefs.

    It holds a grid belief (grid.points[node]) instead of the exact one. After action a and
    token k at node g it moves to a vertex of the interpolation simplex of the filtered belief
    g T_a[k] / (g T_a[k] 1), drawn with the interpolation weights as probabilities, so that in
    expectation it lands on the filtered belief. Being finite, its value is computed exactly;
    drawing rather than rounding keeps its belief from drifting one way. It needs only the
    tokens and its own actions, like the agent.

        node = controller.start(rng)
        for step in range(horizon):
            action = controller.action(node, step)
            token = ...                                  # the env's info["token"]
            node = controller.advance(node, action, token, rng)

    actions[step, node]; start_vertices / start_weights: the prior's interpolation;
    successor_vertices / successor_weights[node, action, token]: the moves (one per vertex).
    """

    def __init__(
        self, grid: SimplexGrid, actions, start_vertices, start_weights, successor_vertices, successor_weights
    ):
        self.grid = grid
        self.actions = actions
        self.start_vertices, self.start_weights = start_vertices, start_weights
        self.successor_vertices, self.successor_weights = successor_vertices, successor_weights

    def start(self, rng: np.random.Generator) -> int:
        return _draw(self.start_vertices, self.start_weights, rng)

    def action(self, node: int, step: int) -> int:
        return int(self.actions[step, node])

    def advance(self, node: int, action: int, token: int, rng: np.random.Generator) -> int:
        return _draw(self.successor_vertices[node, action, token], self.successor_weights[node, action, token], rng)


@dataclasses.dataclass(frozen=True, eq=False)
class Reference:
    """One reference: its policy, the criterion's value, the undiscounted episode return, the time taken."""

    value: float
    episode_return: float
    seconds: float
    policy: StatePolicy | MemorylessPolicy | GridBeliefController


@dataclasses.dataclass(frozen=True, eq=False)
class BeliefOptimalReference(Reference):
    """`value` is exact for `policy`; the optimum lies in [value, upper_bound]."""

    upper_bound: float
    grid_resolution: int

    @property
    def error_bound(self) -> float:
        return self.upper_bound - self.value


@dataclasses.dataclass(frozen=True, eq=False)
class ControlReferences:
    """All references for one task, horizon and gamma (see the module docstring)."""

    horizon: int
    gamma: float
    fully_observed: Reference
    belief_optimal: BeliefOptimalReference
    memoryless: Reference
    open_loop: Reference
    passive: Reference
    memoryless_exhaustive: bool
    # expected_rewards[a, i]: the mean reward of action a in state i. With a filtered belief b,
    # b @ expected_rewards[a] is the mean reward given the history: evaluations can average it
    # instead of the sampled reward (same expectation, less variance).
    expected_rewards: np.ndarray

    def memory_gap_ratio(self, measure: str = "value") -> float:
        """(belief-optimal - max(memoryless, open-loop)) / (belief-optimal - passive).

        The share of what control gains over passivity that needs more than the last observation,
        on `measure`: "value" (the criterion) or "episode_return" (of the same policies). NaN when
        the belief-optimal policy gains no more than its error bound over passivity (nothing to share).
        """
        best, memoryless, open_loop, passive = (
            getattr(getattr(self, name), measure) for name in ("belief_optimal", "memoryless", "open_loop", "passive")
        )
        if best - passive <= self.belief_optimal.error_bound + 1e-9 * (1.0 + abs(best)):  # beyond round-off
            return float("nan")
        return (best - max(memoryless, open_loop)) / (best - passive)

    def table(self) -> str:
        """A Markdown table: every reference's value, episode return and seconds."""
        lines = [
            f"| reference (horizon {self.horizon}, gamma {self.gamma:g}) | value | episode return | seconds |",
            "| --- | --- | --- | --- |",
        ]
        for name in ("fully_observed", "belief_optimal", "memoryless", "open_loop", "passive"):
            reference = getattr(self, name)
            lines.append(
                f"| {name} | {reference.value:.4f} | {reference.episode_return:.4f} | {reference.seconds:.2f} |"
            )
        return "\n".join(lines)


def control_references(
    task,
    *,
    horizon: int,
    gamma: float,
    prior: np.ndarray | None = None,
    passive_action: int = 0,
    value_tolerance: float = 1e-3,
    grid_resolution: int | None = None,
    max_grid_points: int = 200_000,
    memoryless_starts: int = 64,
    seed: int = 0,
) -> ControlReferences:
    """Computes every reference of the module docstring for `task` (an HMMEnv task on a FiniteHMM).

    horizon: the episode length; gamma in (0, 1]; prior: the reset distribution (the model's
    stationary distribution by default, as in HMMEnv). The belief grid doubles its resolution
    from 16 until the belief-optimal bracket is at most value_tolerance wide (reward units of
    the criterion), or is fixed at grid_resolution, which must then be fine enough.
    memoryless_starts random starts (and every constant policy) seed the memoryless search when
    it cannot be exhaustive; `seed` draws them. Raises ValueError naming the problem and the fix.
    """
    problem = _ControlProblem(task, horizon=horizon, gamma=gamma, prior=prior, passive_action=passive_action)
    if not value_tolerance > 0:
        raise ValueError(f"value_tolerance={value_tolerance}; expected a positive width in reward units")
    if not (isinstance(memoryless_starts, (int, np.integer)) and memoryless_starts >= 0):
        raise ValueError(f"memoryless_starts={memoryless_starts!r}; expected an integer >= 0 (constants always start)")
    fully_observed = _timed(problem.fully_observed)
    belief_optimal = _timed(
        lambda: problem.belief_optimal(value_tolerance, grid_resolution=grid_resolution, max_points=max_grid_points)
    )
    start = time.perf_counter()  # one exact evaluation of every constant policy serves open loop and passive
    constant = problem.constant_policies()
    constant_values, constant_returns = problem.evaluate_memoryless(constant)
    best_constant = int(np.argmax(constant_values))
    open_loop_seconds = time.perf_counter() - start
    memoryless = _timed(lambda: problem.best_memoryless(memoryless_starts, seed))
    return ControlReferences(
        horizon=horizon,
        gamma=gamma,
        fully_observed=fully_observed,
        belief_optimal=belief_optimal,
        memoryless=memoryless,
        open_loop=Reference(
            value=float(constant_values[best_constant]),
            episode_return=float(constant_returns[best_constant]),
            seconds=open_loop_seconds,
            policy=MemorylessPolicy(constant[best_constant], problem.num_tokens),
        ),
        passive=Reference(
            value=float(constant_values[passive_action]),
            episode_return=float(constant_returns[passive_action]),
            seconds=open_loop_seconds,
            policy=MemorylessPolicy(constant[passive_action], problem.num_tokens),
        ),
        memoryless_exhaustive=problem.memoryless_is_exhaustive,
        expected_rewards=problem.expected_rewards.copy(),
    )


def _timed(solve) -> Reference:
    """Runs solve() and fills the seconds it took into the reference it returns."""
    start = time.perf_counter()
    reference = solve()
    return dataclasses.replace(reference, seconds=time.perf_counter() - start)


class _ControlProblem:
    """The task as arrays: dynamics[a, k, i, j] = P(token k, next state j | state i, action a), and
    expected_rewards[a, i] = E[task.reward(a, i, k, j)] over (k, j)."""

    def __init__(self, task, *, horizon: int, gamma: float, prior, passive_action: int):
        model = getattr(task, "model", None)
        dynamics = getattr(task, "dynamics", None)
        action_space = getattr(task, "action_space", None)
        if not (
            isinstance(model, FiniteHMM)
            and isinstance(action_space, gymnasium.spaces.Discrete)
            and isinstance(dynamics, tuple)
            and len(dynamics) == action_space.n
            and all(
                isinstance(d, FiniteHMM) and d.transition_matrices.shape == model.transition_matrices.shape
                for d in dynamics
            )
            and callable(getattr(task, "reward", None))
        ):
            raise ValueError(
                f"{type(task).__name__} is not a finite HMM control task; pass an HMMEnv task "
                "(rl.envs.hmm.tasks.Task: model FiniteHMM, action_space Discrete(n), n FiniteHMM dynamics of the "
                "model's shape, reward(action, state, token, next_state)), e.g. env.unwrapped.task"
            )
        if not (isinstance(horizon, (int, np.integer)) and horizon >= 1):
            raise ValueError(f"horizon={horizon!r}; expected the episode length, an integer >= 1")
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma={gamma}; expected a discount in (0, 1] (1 for the undiscounted episode return)")
        if not 0 <= passive_action < action_space.n:
            raise ValueError(f"passive_action={passive_action}; expected an action in [0, {action_space.n})")
        # within round-off: a task may renormalise the passive rows (OccupancyControl's zero tilt does)
        if not np.allclose(dynamics[passive_action].transition_matrices, model.transition_matrices, rtol=0, atol=1e-12):
            raise ValueError(
                f"action {passive_action}'s dynamics differ from task.model; pass as passive_action the action "
                "that leaves the process passive"
            )
        prior = start_belief(model, prior)
        self.horizon, self.gamma, self.prior = int(horizon), float(gamma), prior
        self.num_actions, self.num_tokens, self.num_states = action_space.n, model.num_tokens, model.num_states
        self.num_observations = 1 + self.num_actions * self.num_tokens  # the first step, then (action, token)
        self.dynamics = np.stack([d.transition_matrices for d in dynamics])
        rewards = np.empty(self.dynamics.shape[:1] + (self.num_states, self.num_tokens, self.num_states))
        for action, state, token, next_state in np.ndindex(*rewards.shape):
            rewards[action, state, token, next_state] = task.reward(action, state, token, next_state)[0]
        self.expected_rewards = np.einsum("akij,aikj->ai", self.dynamics, rewards)
        self.discounts = gamma ** np.arange(self.horizon)

    # -- state known ---------------------------------------------------------------------------

    def fully_observed(self) -> Reference:
        transitions = self.dynamics.sum(axis=1)  # (actions, states, next states)
        states = np.arange(self.num_states)
        values = np.zeros(self.num_states)
        actions = np.empty((self.horizon, self.num_states), dtype=np.int64)
        for step in reversed(range(self.horizon)):
            q_values = self.expected_rewards + self.gamma * transitions @ values
            actions[step] = q_values.argmax(axis=0)
            values = q_values.max(axis=0)
        episode_return, distribution = 0.0, self.prior
        for step in range(self.horizon):
            episode_return += distribution @ self.expected_rewards[actions[step], states]
            distribution = distribution @ transitions[actions[step], states]
        return Reference(float(self.prior @ values), float(episode_return), 0.0, StatePolicy(actions))

    # -- what the agent observes now -----------------------------------------------------------

    def evaluate_memoryless(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact (criterion, episode return) of each memoryless policy in `actions` (policies, observations).

        The joint law of (observation, hidden state) is pushed forward step by step; the next
        observation depends only on (action, token), so only the mass acting each way is needed.
        """
        count = len(actions)
        chooses = np.eye(self.num_actions)[actions]  # (policies, observations, actions)
        mass = np.zeros((count, self.num_observations, self.num_states))
        mass[:, 0] = self.prior
        values, returns = np.zeros(count), np.zeros(count)
        for discount in self.discounts:
            acting = np.einsum("pos,poa->pas", mass, chooses)
            step_reward = np.einsum("pas,as->p", acting, self.expected_rewards)
            values += discount * step_reward
            returns += step_reward
            mass[:, 0] = 0.0
            mass[:, 1:] = np.einsum("pai,akij->pakj", acting, self.dynamics).reshape(count, -1, self.num_states)
        return values, returns

    @property
    def memoryless_is_exhaustive(self) -> bool:
        return self.num_actions**self.num_observations <= EXHAUSTIVE_MEMORYLESS_LIMIT

    def constant_policies(self) -> np.ndarray:
        """Row a: the memoryless policy that always takes action a."""
        return np.repeat(np.arange(self.num_actions)[:, None], self.num_observations, axis=1)

    def best_memoryless(self, num_starts: int, seed: int) -> Reference:
        if self.memoryless_is_exhaustive:
            candidates = np.array(list(itertools.product(range(self.num_actions), repeat=self.num_observations)))
            values, returns = self.evaluate_memoryless(candidates)
        else:
            drawn = np.random.default_rng(seed).integers(0, self.num_actions, (num_starts, self.num_observations))
            starts = np.concatenate([self.constant_policies(), drawn])  # constants: never below open-loop
            candidates, values, returns = self._coordinate_ascent(starts)
        best = int(np.argmax(values))
        policy = MemorylessPolicy(candidates[best], self.num_tokens)
        return Reference(float(values[best]), float(returns[best]), 0.0, policy)

    def _coordinate_ascent(self, policies: np.ndarray):
        """Improves every policy one observation at a time (all actions tried) until none improves."""
        policies = policies.copy()
        rows = np.arange(len(policies))
        values, returns = self.evaluate_memoryless(policies)
        improved = True
        while improved:
            improved = False
            for observation in range(self.num_observations):
                trials = np.repeat(policies, self.num_actions, axis=0)
                trials[:, observation] = np.tile(np.arange(self.num_actions), len(policies))
                trial_values, trial_returns = (v.reshape(len(policies), -1) for v in self.evaluate_memoryless(trials))
                best = trial_values.argmax(axis=1)
                # strictly better beyond round-off, so ties never cycle
                better = trial_values[rows, best] > values + 1e-12 * (1.0 + np.abs(values))
                policies[better, observation] = best[better]
                values[better] = trial_values[rows, best][better]
                returns[better] = trial_returns[rows, best][better]
                improved |= bool(better.any())
        return policies, values, returns

    # -- everything the agent has observed: the belief ---------------------------------------------

    def belief_optimal(self, value_tolerance: float, *, grid_resolution: int | None, max_points: int):
        if grid_resolution is None:
            resolutions = _doubling(FIRST_GRID_RESOLUTION, self.num_states, max_points)
        elif isinstance(grid_resolution, (int, np.integer)) and grid_resolution >= 1:
            resolutions = [grid_resolution]
        else:
            raise ValueError(f"grid_resolution={grid_resolution!r}; expected an integer >= 1 (or None to refine)")
        if not resolutions or SimplexGrid.num_points(self.num_states, resolutions[-1]) > max_points:
            too_fine = resolutions[-1] if resolutions else FIRST_GRID_RESOLUTION
            raise ValueError(
                f"a belief grid of resolution {too_fine} on {self.num_states} states has "
                f"{SimplexGrid.num_points(self.num_states, too_fine)} points > max_grid_points={max_points}; raise "
                "max_grid_points or pass a smaller grid_resolution"
            )
        for resolution in resolutions:
            reference = self._grid_solution(SimplexGrid(self.num_states, resolution))
            if reference.error_bound <= value_tolerance:
                return reference
        raise ValueError(
            f"the belief grid of resolution {resolution} brackets the belief-optimal value only within "
            f"{reference.error_bound:.3g} > value_tolerance={value_tolerance:g}; "
            + (
                "raise grid_resolution (the width falls about as 1/resolution^2)"
                if grid_resolution is not None
                else "raise max_grid_points or value_tolerance"
            )
        )

    def _grid_solution(self, grid: SimplexGrid) -> BeliefOptimalReference:
        points = grid.points
        joint = np.einsum("gi,akij->gakj", points, self.dynamics)  # unnormalised successors (g, a, k, j)
        token_probabilities = joint.sum(axis=3)
        # After a token the grid belief calls impossible (the true belief may not), move to the
        # prediction: any belief would do for the controller, and the grid value gives it no weight.
        predicted = joint.sum(axis=2, keepdims=True)
        successors = np.where(token_probabilities[..., None] > 0, joint, np.broadcast_to(predicted, joint.shape))
        successors = successors / successors.sum(axis=3, keepdims=True)
        vertices, weights = grid.interpolation(successors)
        vertices = vertices.astype(np.int32)
        step_weights = token_probabilities[..., None] * weights  # P(k | g, a) * interpolation weight
        grid_rewards = points @ self.expected_rewards.T  # (g, a)
        values = np.zeros(len(points))
        actions = np.empty((self.horizon, len(points)), dtype=np.int8 if self.num_actions < 128 else np.int64)
        for step in reversed(range(self.horizon)):
            q_values = grid_rewards + self.gamma * (step_weights * values[vertices]).sum(axis=(2, 3))
            actions[step] = q_values.argmax(axis=1)
            values = q_values.max(axis=1)
        start_vertices, start_weights = grid.interpolation(self.prior)
        upper_bound = float(start_weights @ values[start_vertices])
        controller = GridBeliefController(grid, actions, start_vertices, start_weights, vertices, weights)
        value, episode_return = self._evaluate_controller(controller)
        return BeliefOptimalReference(
            value=value,
            episode_return=episode_return,
            seconds=0.0,
            policy=controller,
            upper_bound=upper_bound,
            grid_resolution=grid.resolution,
        )

    def _evaluate_controller(self, controller: GridBeliefController) -> tuple[float, float]:
        """Exact (criterion, episode return): the joint law of (node, hidden state) pushed forward."""
        num_points = len(controller.grid.points)
        vertices, weights = controller.successor_vertices, controller.successor_weights
        mass = np.zeros((num_points, self.num_states))
        np.add.at(mass, controller.start_vertices, controller.start_weights[:, None] * self.prior[None, :])
        nodes = np.arange(num_points)
        value = episode_return = 0.0
        for step, discount in enumerate(self.discounts):
            acting = controller.actions[step].astype(np.int64)
            step_reward = float(np.einsum("gi,gi->", mass, self.expected_rewards[acting]))
            value += discount * step_reward
            episode_return += step_reward
            # mass of (node, token, next state), then spread over the next nodes
            moved = np.einsum("gi,gkij->gkj", mass, self.dynamics[acting])
            spread = moved[:, :, None, :] * weights[nodes, acting][..., None]  # (g, k, vertex, j)
            targets = vertices[nodes, acting].ravel()
            spread = spread.reshape(-1, self.num_states)
            mass = np.stack(
                [np.bincount(targets, weights=spread[:, j], minlength=num_points) for j in range(self.num_states)],
                axis=1,
            )
        return value, episode_return


def _draw(vertices: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> int:
    """A vertex drawn with the weights as probabilities (inverse CDF; the last one absorbs round-off)."""
    index = min(int(np.searchsorted(np.cumsum(weights), rng.random(), side="right")), len(weights) - 1)
    return int(vertices[index])


def _doubling(first: int, num_states: int, max_points: int) -> list[int]:
    """first, 2 first, 4 first, ... while the grid stays within max_points."""
    resolutions, resolution = [], first
    while SimplexGrid.num_points(num_states, resolution) <= max_points:
        resolutions.append(resolution)
        resolution *= 2
    return resolutions
