"""One entry point for a reference solution of a FinitePOMDP with both bounds: it picks the method.

    solution = solve_pomdp(pomdp, time_budget=60.0)
    solution.lower, solution.upper, solution.action(belief), solution.trace

At effective horizons 1 / (1 - discount) of 100 steps and more (machine.POMDP: 1000), trials of
the heuristic search do not reach far enough to build a good policy from blind ones, while
`solve_point_based`'s controllers are exact at any horizon (595.8 on machine.POMDP in about 2 s,
against 87 for the search alone in 60 s). There the point-based solution is computed first and
seeds the search's lower bound, which the search then keeps improving along with the upper
bound. At shorter horizons (the classic files, discount 0.95) the search alone does better.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rl.envs.pomdp.model import FinitePOMDP
from rl.envs.solvers.heuristic_search import BoundedSolution, TracePoint, solve_with_bounds
from rl.envs.solvers.mdp import require_discount_below_one
from rl.envs.solvers.point_based import solve_point_based

LONG_HORIZON = 100  # steps of 1 / (1 - discount) from which the point-based solver goes first


def solve_pomdp(
    pomdp: FinitePOMDP,
    *,
    time_budget: float = 60.0,
    target_gap: float = 1e-4,
    progress: Callable[[TracePoint], None] | None = None,
) -> BoundedSolution:
    """Bounds and a policy for `pomdp` within `time_budget` CPU seconds (the module docstring says which method).

    The point-based solver, when used, runs with its defaults inside the budget (seed 0);
    `target_gap` and `progress` go to `solve_with_bounds`. Raises ValueError for discount 1.
    """
    require_discount_below_one(pomdp, "solve_pomdp")
    started = time.process_time()
    seed = None
    if 1.0 / (1.0 - pomdp.discount) >= LONG_HORIZON:
        point_based = solve_point_based(pomdp, seed=0)
        seed = (point_based.alpha_vectors, point_based.controller.actions)
    remaining = max(time_budget - (time.process_time() - started), 1e-3)
    return solve_with_bounds(
        pomdp, time_budget=remaining, target_gap=target_gap, initial_alpha_vectors=seed, progress=progress
    )
