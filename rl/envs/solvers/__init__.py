"""Reference solvers: bounds, QMDP, controllers and a point-based solver for any FinitePOMDP; references
for any controlled FiniteHMM task.

    from rl.envs.solvers import solve_fully_observable, qmdp, solve_point_based, evaluate_controller
    upper = solve_fully_observable(pomdp).value(pomdp.start)     # fully observable MDP optimum
    lower = solve_point_based(pomdp, seed=0).start_value         # value of an executable policy
    solution = solve_pomdp(pomdp, time_budget=60.0)              # both bounds: solution.lower, .upper, .trace
    references = control_references(env.task, horizon=64, gamma=0.9)   # HMM control: every reference
"""

from rl.envs.solvers.choice import solve_pomdp
from rl.envs.solvers.controllers import ControllerEvaluator, FiniteStateController, evaluate_controller
from rl.envs.solvers.heuristic_search import BoundedSolution, TracePoint, solve_with_bounds
from rl.envs.solvers.hmm_control import (
    BeliefOptimalReference,
    ControlReferences,
    GridBeliefController,
    MemorylessPolicy,
    Reference,
    StatePolicy,
    control_references,
)
from rl.envs.solvers.mdp import MDPSolution, QMDPPolicy, qmdp, require_discount_below_one, solve_fully_observable
from rl.envs.solvers.point_based import PointBasedSolution, project_policy, solve_point_based
from rl.envs.solvers.rollout import RolloutEstimate, rollout_horizon, rollout_value

__all__ = [
    "BeliefOptimalReference",
    "BoundedSolution",
    "ControlReferences",
    "ControllerEvaluator",
    "FiniteStateController",
    "GridBeliefController",
    "MDPSolution",
    "MemorylessPolicy",
    "PointBasedSolution",
    "QMDPPolicy",
    "Reference",
    "RolloutEstimate",
    "StatePolicy",
    "TracePoint",
    "control_references",
    "evaluate_controller",
    "project_policy",
    "qmdp",
    "require_discount_below_one",
    "rollout_horizon",
    "rollout_value",
    "solve_fully_observable",
    "solve_point_based",
    "solve_pomdp",
    "solve_with_bounds",
]
