"""An anytime POMDP solver with both bounds: heuristic search over reachable beliefs, guided by the gap.

    solution = solve_with_bounds(pomdp, time_budget=60.0)
    solution.lower, solution.upper          # bounds on the optimal value at pomdp.start
    solution.action(belief)                 # the policy behind `lower` (greedy on its alpha vectors)
    solution.trace[-1]                      # TracePoint(seconds, lower, upper, alpha_vectors, upper_points)

The method follows the idea of HSVI2 (Smith and Simmons, UAI 2005) and SARSOP (Kurniawati, Hsu
and Lee, RSS 2008): keep a lower bound (alpha vectors: the values of policies one can run) and
an upper bound on the optimal value function, and improve both only at beliefs reachable from
the start, chosen where the gap between them matters for the start belief.

- Lower bound: max over alpha vectors. It starts with the "blind" policies (always action a,
  values solved exactly), or with vectors the caller passes; every vector added is a point
  backup of the set at a belief, so the greedy policy over the set earns at least its bound.
  A new vector is kept when it beats the set at its belief, and it removes the vectors it
  dominates everywhere (pointwise), which keeps that guarantee.
- Upper bound: the minimum of the fast informed bound (Hauskrecht 2000; iterated from the
  fully observable Q-values, each iterate an upper bound) and a sawtooth interpolation over
  belief points with upper values, whose corners are the FIB's state values.
- Search: trials from the start belief. At each belief the bounds of every child belief
  (one per action and possible observation) are computed; the trial takes the action best on
  the upper bound and the observation with the largest probability-weighted excess gap
  P(o) (U - L - eps / discount^(t+1)), and stops where the gap is within eps / discount^t (the
  part that can still matter at the start) or no child has an excess gap. Then every belief of
  the trial is backed up in reverse order: a new alpha vector for the lower bound and a new
  upper value point. The trial width eps is `trial_gap_fraction` times the current gap at the
  start, so trials deepen as the bounds close (HSVI2 keeps eps fixed); `swept_trial_gap_fraction`
  (0.9) while sweeps run, which carry values along so that shallow trials suffice (web-ad closes
  in half the time), where without them only deep trials bring values back to the start (at 0.9
  fourth's lower bound at 30 s fell from 0.33 to 0.15, pentagon's from 0.66 to 0.51). Models
  below 200 states with discount 0.99 and more get the wide trials without sweeps too
  (`wide_trials_from_discount`: learning.c4's lower bound at 30 s rose from 2.945 to 3.014).
- Sweeps: after each trial, while cheap (small models), both bounds are backed up at every
  corner and upper point at once, a few times (`_Search.sweep`): value iteration on the points,
  batched. Tiger then closes to a gap of 1e-3 in 5x fewer trials.
- Stops when the gap at the start is at most `target_gap` or the time budget is spent. The budget
  and the trace count CPU seconds of this process (`time.process_time`), as SARSOP's do: on a
  shared machine wall-clock seconds measure the load as much as the solver.

Child beliefs come from sparse per-action transitions, and the sawtooth looks only at points
whose support the queried belief can cover, so on TagAvoid (870 states, 5 actions, 30
observations; most beliefs on at most 30 states) a trial takes some 30 ms. Where beliefs are
dense, trials read the sawtooth over a shortlist of points (`_UpperBound._dense_drops`): a looser
upper bound, but twice the trials on the 28-observation mazes (sunysb, mit, cit, pentagon, fourth,
all of 200 states and more). On smaller models the shortlisted values are made exact for the
action that leads on the upper bound (`_Search._exact_best_upper`), so trials and backups see the
exact sawtooth's best Q-value at the cost of one action's children.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from rl.envs.pomdp.model import FinitePOMDP
from rl.envs.solvers.mdp import require_discount_below_one, solve_fully_observable


@dataclasses.dataclass(frozen=True)
class TracePoint:
    """The bounds at the start belief after `seconds` (CPU seconds of the solve), and the sizes of both representations."""

    seconds: float
    lower: float
    upper: float
    alpha_vectors: int
    upper_points: int


@dataclasses.dataclass(frozen=True, eq=False)
class BoundedSolution:
    """A policy (alpha vectors with their actions) and bounds on the optimal value at the start belief.

    lower: the start value of the policy's bound (the greedy policy earns at least this);
    upper: an upper bound on the optimal value; trace: the bounds over time.
    """

    alpha_vectors: np.ndarray
    alpha_actions: np.ndarray
    upper_beliefs: np.ndarray
    upper_values: np.ndarray
    corner_values: np.ndarray
    informed_q_values: np.ndarray
    lower: float
    upper: float
    seconds: float
    trace: tuple[TracePoint, ...]

    def value(self, belief: np.ndarray) -> float:
        """The lower bound at a belief: max_n alpha_n . belief."""
        return float(np.max(self.alpha_vectors @ belief))

    def action(self, belief: np.ndarray) -> int:
        """The action of the best alpha vector at this belief: the policy whose value `value` bounds."""
        return int(self.alpha_actions[np.argmax(self.alpha_vectors @ belief)])

    def upper_value(self, belief: np.ndarray) -> float:
        """The upper bound at a belief (FIB and sawtooth, whichever is lower); rebuilds the bound on every call."""
        upper = _UpperBound(self.informed_q_values, self.corner_values)
        for point, value in zip(self.upper_beliefs, self.upper_values):
            upper.add(point, value)
        return float(upper.values(np.asarray(belief, dtype=np.float64)[None])[0])


def solve_with_bounds(
    pomdp: FinitePOMDP,
    *,
    time_budget: float = 60.0,
    target_gap: float = 1e-4,
    trial_gap_fraction: float = 0.5,
    swept_trial_gap_fraction: float = 0.9,
    max_depth: int = 400,
    initial_alpha_vectors: tuple[np.ndarray, np.ndarray] | None = None,
    informed_bound_seconds: float | None = None,
    progress: Callable[[TracePoint], None] | None = None,
    progress_interval: float = 5.0,
    max_sweeps_per_trial: int = 8,
    shortlisted_upper_from_states: int = 200,
    wide_trials_from_discount: float = 0.99,
    sweep_elements_per_trial: int = 1 << 23,
) -> BoundedSolution:
    """Solves `pomdp` from its start belief until the gap is at most `target_gap` or `time_budget` CPU seconds are spent.

    initial_alpha_vectors: (vectors (n, states), actions (n,)) to start the lower bound from, e.g.
    a controller's exact values (`solve_point_based`); each must be the value of a policy that
    starts with its action. informed_bound_seconds caps the FIB iterations (default: a tenth of
    the budget). progress, if given, receives a TracePoint at most every `progress_interval`
    seconds and at the end. After each trial, up to `max_sweeps_per_trial` sweeps run, as many as
    fit in `sweep_elements_per_trial` array elements (a deterministic cost, not a time: none on
    large models). Trials read the shortlisted sawtooth; on models below `shortlisted_upper_from_states`
    states they make it exact for the action they take and the value they back up
    (`_Search._exact_best_upper`); there, at discounts of `wide_trials_from_discount` and more,
    trials are as wide as while sweeps run. Deterministic (no randomness). Raises
    ValueError for discount 1.
    """
    require_discount_below_one(pomdp, "solve_with_bounds")
    fractions = (trial_gap_fraction, swept_trial_gap_fraction)
    if time_budget <= 0 or target_gap <= 0 or not all(0 < fraction <= 1 for fraction in fractions) or max_depth < 1:
        raise ValueError(
            f"time_budget={time_budget}, target_gap={target_gap}, trial_gap_fraction={trial_gap_fraction}, "
            f"swept_trial_gap_fraction={swept_trial_gap_fraction}, max_depth={max_depth}: expected positive "
            "budget and gap, fractions in (0, 1] and depth >= 1"
        )
    started = time.process_time()
    informed_seconds = time_budget / 10 if informed_bound_seconds is None else informed_bound_seconds
    search = _Search(
        pomdp,
        initial_alpha_vectors,
        informed_bound_deadline=started + informed_seconds,
        exact_upper_in_trials=pomdp.num_states < shortlisted_upper_from_states,
    )
    trace: list[TracePoint] = []
    last_report = -np.inf

    def record() -> TracePoint:
        lower, upper = search.bounds_at_start()
        point = TracePoint(
            seconds=time.process_time() - started,
            lower=lower,
            upper=upper,
            alpha_vectors=search.lower.count,
            upper_points=search.upper.count,
        )
        trace.append(point)
        return point

    # Half the gap lets a trial run about ln 2 / (1 - discount) steps deep: 69 at discount 0.99. On the
    # models below the shortlist threshold the wide trials of the swept models pay there too
    # (learning.c4 at 30 CPU s: 469 trials instead of 212, lower bound 3.014 instead of 2.945, SARSOP
    # 3.040), while at discount 0.95 the shallow ones stall tiger-grid's upper bound (2.533 instead of
    # 2.514). The mazes of 200 states and more keep half the gap (module docstring).
    wide_without_sweeps = search.exact_upper_in_trials and pomdp.discount >= wide_trials_from_discount
    deadline = started + time_budget
    point = record()
    while point.upper - point.lower > target_gap and time.process_time() < deadline:
        swept = sweep_elements_per_trial >= search.sweep_cost()  # sweeps will follow (the module docstring)
        fraction = swept_trial_gap_fraction if swept or wide_without_sweeps else trial_gap_fraction
        search.trial(fraction * (point.upper - point.lower), max_depth, deadline)
        for _ in range(min(max_sweeps_per_trial, sweep_elements_per_trial // search.sweep_cost())):
            search.sweep()
        point = record()
        if progress is not None and point.seconds - last_report >= progress_interval:
            progress(point)
            last_report = point.seconds
    if progress is not None and last_report != point.seconds:
        progress(point)
    upper = search.upper
    return BoundedSolution(
        alpha_vectors=search.lower.vectors.copy(),
        alpha_actions=search.lower.actions.copy(),
        upper_beliefs=upper.beliefs.copy(),
        upper_values=upper.point_values.copy(),
        corner_values=upper.corner_values.copy(),
        informed_q_values=upper.informed_q_values,
        lower=point.lower,
        upper=point.upper,
        seconds=point.seconds,
        trace=tuple(trace),
    )


class _Dynamics:
    """Sparse per-action transitions and the children of a belief (one per action and possible observation)."""

    def __init__(self, pomdp: FinitePOMDP):
        self.num_actions, self.num_states, self.num_observations = (
            pomdp.num_actions,
            pomdp.num_states,
            pomdp.num_observations,
        )
        self.discount = pomdp.discount
        self.rewards = np.asarray(pomdp.expected_rewards)  # (actions, states)
        self.observations = np.asarray(pomdp.observations)  # (actions, end states, observations)
        self.dense_transitions = np.asarray(pomdp.transitions)  # (actions, states, end states): for sweeps
        self.transitions = [scipy.sparse.csr_matrix(matrix) for matrix in pomdp.transitions]
        # predicted[a * S + s2] = sum_s b(s) T[a, s, s2]: one sparse product for every action
        self._predict = scipy.sparse.vstack([matrix.T for matrix in self.transitions], format="csr")

    def children(self, belief: np.ndarray):
        """(actions, observations, probabilities, beliefs) of every child with P(o | belief, a) > 0.

        probabilities is the full (actions, observations) table; beliefs holds one row per child.
        """
        predicted = (self._predict @ belief).reshape(self.num_actions, self.num_states)
        joint = predicted[:, :, None] * self.observations
        probabilities = joint.sum(axis=1)
        actions, observations = np.nonzero(probabilities > 0)
        beliefs = joint[actions, :, observations] / probabilities[actions, observations, None]
        return actions, observations, probabilities, beliefs, predicted

    def children_of_all(self, beliefs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(probabilities (beliefs, actions, observations), rows, child beliefs) for a batch: dense, for small models.

        rows indexes the flattened (belief, action, observation) triples with P(o | b, a) > 0, one child each.
        """
        predicted = np.einsum("ns,ast->nat", beliefs, self.dense_transitions)
        joint = predicted[:, :, :, None] * self.observations[None]  # (beliefs, actions, end states, observations)
        probabilities = joint.sum(axis=2)
        rows = np.flatnonzero(probabilities > 0)
        children = joint.transpose(0, 1, 3, 2).reshape(-1, self.num_states)[rows] / probabilities.reshape(-1, 1)[rows]
        return probabilities, rows, children


class _LowerBound:
    """Alpha vectors with their actions, in arrays that grow by doubling."""

    def __init__(self, vectors: np.ndarray, actions: np.ndarray):
        self._vectors = np.array(vectors, dtype=np.float64)
        self._actions = np.array(actions, dtype=np.int64)
        self.count = len(self._actions)

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self.count]

    @property
    def actions(self) -> np.ndarray:
        return self._actions[: self.count]

    def best(self, beliefs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, index of the best vector) for each row of `beliefs`, over the beliefs' joint support."""
        covered = beliefs.any(axis=0)
        if covered.mean() > 0.5:
            scores = self.vectors @ beliefs.T  # (vectors, beliefs)
        else:  # a product over the support only: TagAvoid's beliefs cover some 30 of its 870 states
            support = np.flatnonzero(covered)
            scores = self.vectors[:, support] @ beliefs[:, support].T
        best = scores.argmax(axis=0)
        return scores[best, np.arange(len(best))], best

    def add_many(self, vectors: np.ndarray, actions: np.ndarray) -> None:
        """`add` for each row; the rows the set already dominates are screened out at once (most of a sweep's)."""
        vectors, first = np.unique(vectors, axis=0, return_index=True)
        dominated = np.any(np.all(self.vectors[None] >= vectors[:, None], axis=2), axis=1)
        for vector, action in zip(vectors[~dominated], actions[first[~dominated]]):
            self.add(vector, int(action))

    def add(self, vector: np.ndarray, action: int) -> None:
        """Adds `vector` unless another dominates it everywhere; drops the vectors it dominates."""
        vectors = self.vectors
        if np.any(np.all(vectors >= vector, axis=1)):
            return
        keep = ~np.all(vector >= vectors, axis=1)
        kept = int(keep.sum())
        if kept < self.count:
            self._vectors[:kept] = vectors[keep]
            self._actions[:kept] = self.actions[keep]
            self.count = kept
        if self.count == len(self._actions):
            self._vectors, self._actions = _doubled(self._vectors), _doubled(self._actions)
        self._vectors[self.count] = vector
        self._actions[self.count] = action
        self.count += 1


class _UpperBound:
    """min(FIB, sawtooth): informed_q_values (actions, states), corners (states,) and points (belief, value).

    The sawtooth value at b is corner . b + min over points i of (v_i - corner . b_i) times
    min over the support of b_i of b(s) / b_i(s), which is 0 unless b covers b_i's support. So a
    point counts only where b holds its most likely state (its anchor): where beliefs are sparse
    (TagAvoid) that screens out most points, and the ratios are then taken over each point's own
    support; where they are not, the ratios of all points are computed at once, densely.
    """

    def __init__(self, informed_q_values: np.ndarray, corner_values: np.ndarray):
        self.informed_q_values = informed_q_values
        self.corner_values = np.array(corner_values, dtype=np.float64)
        num_states = len(self.corner_values)
        self._beliefs = np.empty((16, num_states))
        self._values = np.empty(16)
        self._drops = np.empty(16)  # v_i - corner . b_i
        self._anchors = np.empty(16, dtype=np.int64)
        self._anchor_inverse = np.empty(16)  # 1 / b_i(anchor): b_i(anchor) >= 1 / states, so finite
        # the supports, concatenated: point i owns entries starts[i] to starts[i] + lengths[i]
        self._starts = np.empty(16, dtype=np.int64)
        self._lengths = np.empty(16, dtype=np.int64)
        self._support_states = np.empty(16, dtype=np.int64)
        self._support_values = np.empty(16)
        self._support_used = 0
        self._index_of = {}  # belief bytes -> point: trials back up the same beliefs (the start) again and again
        self.count = 0

    @property
    def beliefs(self) -> np.ndarray:
        return self._beliefs[: self.count]

    @property
    def point_values(self) -> np.ndarray:
        return self._values[: self.count]

    def values(self, beliefs: np.ndarray, exact: bool = True) -> np.ndarray:
        """The upper bound at each row of `beliefs`; exact=False may return more (`_dense_drops`), never less."""
        corner = beliefs @ self.corner_values
        bound = np.minimum(corner, (beliefs @ self.informed_q_values.T).max(axis=1))
        if self.count == 0:
            return bound
        candidates = beliefs[:, self._anchors[: self.count]] > 0  # (beliefs, points)
        if candidates.mean() > 0.25:
            drops = self._dense_drops(beliefs, exact)
        else:
            drops = np.zeros(len(beliefs))
            query, point = np.nonzero(candidates)
            if len(point):
                ratios = self._sparse_ratios(beliefs, query, point)
                np.minimum.at(drops, query, ratios * self._drops[point])
        bound = np.minimum(bound, corner + drops)
        if not exact:  # a shortlist may miss the point at the belief itself; a trial would return there forever
            for row, belief in enumerate(beliefs):
                known = self._index_of.get(belief.tobytes())
                if known is not None:
                    bound[row] = min(bound[row], self._values[known])
        return bound

    SHORTLIST = 32  # points in the first shortlist of `_dense_drops`

    def shortlist_covers_all(self) -> bool:
        """Whether `values(..., exact=False)` is the exact sawtooth: the first shortlist holds every point."""
        return self.count <= self.SHORTLIST

    def _dense_drops(self, beliefs: np.ndarray, exact: bool) -> np.ndarray:
        """min(0, min over all points of ratio * drop) for every belief; over the shortlist only unless `exact`.

        The ratio is at most b(anchor) / b_i(anchor), so that times the drop bounds each point's term
        from below. Exact ratios are computed for the `SHORTLIST` points with the lowest such bound;
        a belief whose best exact term beats every other point's bound is done, the others are done
        again with a shortlist 8 times longer, and so on up to all points. Where beliefs spread over
        most states (the 300-state maze sunysb: some 215 each) the anchor's bound is loose and half
        the beliefs go on to longer lists, 7x the work of the first one. The first list's minimum is
        the sawtooth over fewer points, still an upper bound, which is what `exact=False` returns.
        """
        shortlist = self.SHORTLIST
        drops = self._drops[: self.count]
        bounds = (
            beliefs[:, self._anchors[: self.count]] * self._anchor_inverse[: self.count] * drops
        )  # (beliefs, points)
        best = np.empty(len(beliefs))
        rows = np.arange(len(beliefs))
        while len(rows):
            if shortlist >= self.count:
                best[rows] = self._exact_drops(beliefs[rows], np.arange(self.count)[None].repeat(len(rows), axis=0))
                break
            listed = np.argpartition(bounds[rows], shortlist - 1, axis=1)[:, :shortlist]
            best[rows] = self._exact_drops(beliefs[rows], listed)
            if not exact:
                break
            # argpartition leaves the other points' bounds at or above the last listed one's
            rows = rows[best[rows] > bounds[rows, listed[:, -1]]]
            shortlist *= 8
        return best

    def _exact_drops(self, beliefs: np.ndarray, points: np.ndarray, max_elements: int = 1 << 22) -> np.ndarray:
        """min(0, min over points[j] of ratio * drop) for each belief j; points has one row of indices per belief.

        Beliefs go in chunks of at most `max_elements` (belief, point, state) products (32 MB).
        """
        drops = np.empty(len(beliefs))
        chunk = max(1, max_elements // (points.shape[1] * beliefs.shape[1]))
        for start in range(0, len(beliefs), chunk):
            rows = slice(start, start + chunk)
            # Divided, not multiplied by 1 / b_i(s): that overflows to inf for a subnormal b_i(s) (~1e-310),
            # and then 0 * inf is NaN (the sparse path keeps it) or skipped as outside the support (fmin
            # here), either way not the sawtooth and possibly below the value function. The quotient is
            # the ratio correctly rounded for any b_i(s) > 0: 0 where b(s) = 0, and inf only where the
            # true ratio exceeds the largest float, far above the anchor's (at most the number of
            # states), so the minimum is never inf. 0 / 0, a state outside both supports, is NaN, which
            # fmin skips.
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                ratios = np.fmin.reduce(beliefs[rows, None, :] / self._beliefs[points[rows]], axis=2)
            drops[rows] = (ratios * self._drops[points[rows]]).min(axis=1, initial=0.0)
        return drops

    def _sparse_ratios(self, beliefs: np.ndarray, query: np.ndarray, point: np.ndarray) -> np.ndarray:
        """min over the support of point[j] of beliefs[query[j], s] / b_point(s), for each pair j."""
        lengths = self._lengths[point]
        offsets = np.cumsum(lengths) - lengths
        entries = np.arange(int(lengths.sum())) + np.repeat(self._starts[point] - offsets, lengths)
        # divided for the reason given in _exact_drops; every b_point(s) here is > 0, so no NaN
        with np.errstate(over="ignore"):
            ratios = beliefs[np.repeat(query, lengths), self._support_states[entries]] / self._support_values[entries]
        return np.minimum.reduceat(ratios, offsets)

    def improve(self, corner_values: np.ndarray, point_values: np.ndarray) -> None:
        """Lowers the corner and point values to these where they are lower (a sweep's backups)."""
        np.minimum(self.corner_values, corner_values, out=self.corner_values)
        np.minimum(self.point_values, point_values, out=self._values[: self.count])
        self._drops[: self.count] = self.point_values - self.beliefs @ self.corner_values

    def add(self, belief: np.ndarray, value: float) -> None:
        """A point with an upper value; a corner belief lowers the corner value, a known belief its point's value."""
        support = np.flatnonzero(belief)
        if len(support) == 1:
            state = support[0]
            if value < self.corner_values[state]:
                self.corner_values[state] = value
                self._drops[: self.count] = self.point_values - self.beliefs @ self.corner_values
            return
        key = belief.tobytes()
        known = self._index_of.get(key)
        if known is not None:
            if value < self._values[known]:
                self._values[known] = value
                self._drops[known] = value - belief @ self.corner_values
            return
        self._index_of[key] = self.count
        if self.count == len(self._values):
            self._beliefs, self._values, self._drops, self._anchors, self._anchor_inverse = (
                _doubled(array)
                for array in (self._beliefs, self._values, self._drops, self._anchors, self._anchor_inverse)
            )
            self._starts, self._lengths = _doubled(self._starts), _doubled(self._lengths)
        while self._support_used + len(support) > len(self._support_states):
            self._support_states, self._support_values = _doubled(self._support_states), _doubled(self._support_values)
        index, used = self.count, self._support_used
        self._beliefs[index] = belief
        self._values[index] = value
        self._drops[index] = value - belief @ self.corner_values
        self._anchors[index] = anchor = int(np.argmax(belief))
        self._anchor_inverse[index] = 1.0 / belief[anchor]
        self._starts[index], self._lengths[index] = used, len(support)
        self._support_states[used : used + len(support)] = support
        self._support_values[used : used + len(support)] = belief[support]
        self._support_used += len(support)
        self.count += 1


def _doubled(array: np.ndarray) -> np.ndarray:
    """`array` with room for as many rows again (the new rows uninitialised)."""
    return np.concatenate([array, np.empty_like(array)])


@dataclasses.dataclass
class _Node:
    """A belief of a trial with its children and both bounds at them: what the choices and the backup need."""

    belief: np.ndarray
    actions: np.ndarray  # per child
    observations: np.ndarray  # per child
    probabilities: np.ndarray  # (actions, observations)
    children: np.ndarray  # (children, states)
    predicted: np.ndarray  # (actions, states): the belief after each action, before its observation
    child_lower: np.ndarray
    child_upper: np.ndarray
    pending_exact: np.ndarray  # (actions,): child_upper shortlisted, to be made exact when the action leads
    lower: float  # the bounds at the belief itself, before its backup
    upper: float


class _Search:
    def __init__(
        self, pomdp: FinitePOMDP, initial_alpha_vectors, informed_bound_deadline: float, exact_upper_in_trials: bool
    ):
        self.dynamics = _Dynamics(pomdp)
        if initial_alpha_vectors is None:
            initial_alpha_vectors = _blind_policy_values(self.dynamics)
        self.lower = _LowerBound(*initial_alpha_vectors)
        informed = _fast_informed_bound(pomdp, self.dynamics, informed_bound_deadline)
        self.upper = _UpperBound(informed, informed.max(axis=0))
        self.start = np.asarray(pomdp.start, dtype=np.float64)
        self.exact_upper_in_trials = exact_upper_in_trials

    def sweep(self) -> None:
        """One backup of both bounds at every corner and upper point at once (Jacobi value iteration on them).

        A backup of an upper bound is an upper bound (the Bellman operator is monotone), so each new
        upper value may replace the old one where lower; each backed-up alpha vector is the value of
        a policy, kept where it raises the lower bound at its belief. On small models one batched
        sweep costs about as much as one backup in a trial, and it carries an improvement at a
        belief to every point whose children lie near it, not only along the trial's path (tiger:
        the start belief, where opening a door leads back to, gains only once per trial otherwise).
        """
        dynamics, upper, lower = self.dynamics, self.upper, self.lower
        beliefs = np.vstack([np.eye(dynamics.num_states), upper.beliefs])
        probabilities, rows, children = dynamics.children_of_all(beliefs)
        child_values = np.zeros(probabilities.size)
        child_values[rows] = upper.values(children)
        future = (probabilities.reshape(-1) * child_values).reshape(probabilities.shape).sum(axis=2)
        immediate = beliefs @ dynamics.rewards.T  # (beliefs, actions)
        backed_up = (immediate + dynamics.discount * future).max(axis=1)
        upper.improve(backed_up[: dynamics.num_states], backed_up[dynamics.num_states :])
        # the lower bound: per (belief, action), the best vector after each observation (any vector where
        # the observation is impossible: it then adds nothing at this belief, and still a policy's value)
        successors = np.zeros(probabilities.size, dtype=np.int64)
        successors[rows] = lower.best(children)[1]
        chosen = lower.vectors[successors].reshape(*probabilities.shape, dynamics.num_states)  # (n, A, O, S)
        after_observation = np.einsum("aso,naos->nas", dynamics.observations, chosen)
        vectors = dynamics.rewards + dynamics.discount * np.einsum(
            "ast,nat->nas", dynamics.dense_transitions, after_observation
        )
        values = np.einsum("nas,ns->na", vectors, beliefs)
        actions = values.argmax(axis=1)
        best = values[np.arange(len(beliefs)), actions]
        improved = np.flatnonzero(best > lower.best(beliefs)[0] + 1e-12)
        lower.add_many(vectors[improved, actions[improved]], actions[improved])

    def sweep_cost(self) -> int:
        """Elements of the largest array in `sweep`: (corners + points) x children each x points x states."""
        dynamics = self.dynamics
        beliefs = dynamics.num_states + self.upper.count
        return (
            beliefs * dynamics.num_actions * dynamics.num_observations * max(self.upper.count, 1) * dynamics.num_states
        )

    def bounds_at_start(self) -> tuple[float, float]:
        return float(self.lower.best(self.start[None])[0][0]), float(self.upper.values(self.start[None])[0])

    def expand(self, belief: np.ndarray) -> _Node:
        """The children of `belief` and both bounds at them and at `belief` (one batch for each bound)."""
        actions, observations, probabilities, children, predicted = self.dynamics.children(belief)
        batch = np.vstack([children, belief])
        lower = self.lower.best(batch)[0]
        # the shortlisted sawtooth: a looser upper bound at a fraction of the cost on dense beliefs; on smaller
        # models `_exact_best_upper` then makes it exact where it decides the trial and the backup (sunysb at
        # 30 CPU s, shortlisted only: 51 trials instead of 25, lower bound 0.546 instead of 0.41; SARSOP 0.459)
        upper = np.maximum(self.upper.values(batch, exact=False), lower)
        # a NaN would pass np.maximum and win every argmax, steering trials by garbage: stop with the belief
        if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
            raise FloatingPointError(
                f"bounds not finite at belief {belief.tolist()} or one of its children (last: the belief): "
                f"lower {lower.tolist()}, upper {upper.tolist()}; a bug in _LowerBound or _UpperBound"
            )
        # with at most a shortlist's worth of points the shortlisted values are exact: nothing to redo (on
        # ejs1, 3 states and some 30 points, redoing them halved the trials)
        redo = self.exact_upper_in_trials and not self.upper.shortlist_covers_all()
        pending_exact = np.full(self.dynamics.num_actions, redo)
        return _Node(
            belief, actions, observations, probabilities, children, predicted,
            lower[:-1], upper[:-1], pending_exact, float(lower[-1]), float(upper[-1]),
        )  # fmt: skip

    def q_values(self, node: _Node) -> tuple[np.ndarray, np.ndarray]:
        """Both bounds' Q-values at the node: R(b, a) + discount * sum_o P(o | b, a) bound(child)."""
        dynamics = self.dynamics
        weights = node.probabilities[node.actions, node.observations]
        immediate = dynamics.rewards @ node.belief
        return tuple(
            immediate + dynamics.discount * np.bincount(node.actions, weights * values, minlength=dynamics.num_actions)
            for values in (node.child_lower, node.child_upper)
        )

    def _exact_best_upper(self, node: _Node) -> tuple[np.ndarray, np.ndarray]:
        """`q_values(node)`, the best upper one made exact: the leading action's children get the exact sawtooth until one such leads.

        Shortlisted values bound the exact ones from above, so an action whose exact Q-value beats
        every other action's shortlisted one is the best on the exact sawtooth too, with the same
        Q-value: the trial and the backup get what the exact sawtooth at every child would give them,
        at the cost of one action's children (more where the shortlist misses). Backups of the
        shortlisted values themselves stored looser points (Hallway's upper bound at 60 s: 1.209,
        SARSOP 1.206; 1.2037 this way); the exact sawtooth at every child is slower (learning.c4 at
        30 CPU s: 192 trials, 212 this way).
        """
        q_lower, q_upper = self.q_values(node)
        while node.pending_exact[action := int(q_upper.argmax())]:
            of_action = node.actions == action
            exact = self.upper.values(node.children[of_action])
            node.child_upper[of_action] = np.maximum(exact, node.child_lower[of_action])
            node.pending_exact[action] = False
            q_lower, q_upper = self.q_values(node)
        return q_lower, q_upper

    def trial(self, width: float, max_depth: int, deadline: float) -> None:
        """One trial from the start belief (module docstring), then backups along it in reverse order."""
        discount = self.dynamics.discount
        path: list[tuple[_Node, int | None]] = []  # each node and the index of the child the trial went to
        node = self.expand(self.start)
        for depth in range(max_depth):
            q_lower, q_upper = self._exact_best_upper(node)
            threshold = width / discount**depth
            gap = min(node.upper, q_upper.max()) - max(node.lower, q_lower.max())
            action = int(q_upper.argmax())
            of_action = np.flatnonzero(node.actions == action)
            excess = node.probabilities[action, node.observations[of_action]] * (
                node.child_upper[of_action] - node.child_lower[of_action] - threshold / discount
            )
            if gap <= threshold or excess.max() <= 0 or time.process_time() > deadline:
                path.append((node, None))
                break
            chosen = int(of_action[excess.argmax()])
            path.append((node, chosen))
            node = self.expand(node.children[chosen])
        for node, chosen in reversed(path):
            if chosen is not None:  # the child the trial went to was backed up since: refresh its bounds
                child = node.children[chosen][None]
                node.child_lower[chosen] = lower = self.lower.best(child)[0][0]
                node.child_upper[chosen] = max(self.upper.values(child)[0], lower)
            self._backup(node)

    def _backup(self, node: _Node) -> None:
        """The point backup of both bounds at the node: a new upper point and alpha vector where they improve."""
        dynamics = self.dynamics
        q_lower, q_upper = self._exact_best_upper(node)
        if q_upper.max() < node.upper - 1e-12:
            self.upper.add(node.belief, float(q_upper.max()))
            node.upper = float(q_upper.max())
        if q_lower.max() <= node.lower + 1e-12:
            return
        action = int(q_lower.argmax())
        # the best vector after each observation; for observations impossible here, the best at the prediction
        of_action = node.actions == action
        best_vectors = self.lower.best(np.vstack([node.children[of_action], node.predicted[action]]))[1]
        successors = np.full(dynamics.num_observations, best_vectors[-1])
        successors[node.observations[of_action]] = best_vectors[:-1]
        future = np.einsum("so,os->s", dynamics.observations[action], self.lower.vectors[successors])
        self.lower.add(dynamics.rewards[action] + dynamics.discount * (dynamics.transitions[action] @ future), action)
        node.lower = float(q_lower.max())


def _blind_policy_values(dynamics: _Dynamics) -> tuple[np.ndarray, np.ndarray]:
    """The exact values of 'always take action a', one vector per action (Hauskrecht 2000's blind bound)."""
    identity = scipy.sparse.identity(dynamics.num_states, format="csc")
    vectors = np.stack(
        [
            scipy.sparse.linalg.spsolve(identity - dynamics.discount * matrix.tocsc(), dynamics.rewards[action])
            for action, matrix in enumerate(dynamics.transitions)
        ]
    )
    return vectors, np.arange(dynamics.num_actions)


def _fast_informed_bound(pomdp: FinitePOMDP, dynamics: _Dynamics, deadline: float, tolerance: float = 1e-9):
    """FIB Q-values (actions, states), iterated from the fully observable ones until they settle or time runs out.

    Q(a, s) = R(a, s) + discount * sum_o max_a2 sum_s2 T(a, s, s2) O(a, s2, o) Q(a2, s2). The MDP
    values are a fixed point of a larger operator, so the iterates decrease and each bounds the
    optimal POMDP values from above.
    """
    num_actions, num_states, num_observations = dynamics.num_actions, dynamics.num_states, dynamics.num_observations
    # rows (a, o, s): T(a, s, s2) O(a, s2, o), one sparse matrix for all pairs
    blocks = scipy.sparse.vstack(
        [
            dynamics.transitions[action].multiply(dynamics.observations[action, :, observation][None, :])
            for action in range(num_actions)
            for observation in range(num_observations)
        ],
        format="csr",
    )
    q_values = solve_fully_observable(pomdp).q_values
    while time.process_time() < deadline:
        future = (blocks @ q_values.T).reshape(num_actions, num_observations, num_states, num_actions)
        updated = dynamics.rewards + dynamics.discount * future.max(axis=3).sum(axis=1)
        updated = np.minimum(updated, q_values)  # round-off must not loosen the bound
        change = float(np.abs(updated - q_values).max())
        q_values = updated
        if change <= tolerance * (1.0 + float(np.abs(q_values).max())):
            break
    return q_values
