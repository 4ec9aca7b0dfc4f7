"""Reference solvers: bounds, QMDP, controllers and a point-based solver for any FinitePOMDP; references
for any controlled FiniteHMM task.

    from rl.envs.solvers import solve_fully_observable, qmdp, solve_point_based, evaluate_controller
    upper = solve_fully_observable(pomdp).value(pomdp.start)     # fully observable MDP optimum
    lower = solve_point_based(pomdp, seed=0).start_value         # value of an executable policy
    references = control_references(env.task, horizon=64, gamma=0.9)   # HMM control: every reference
"""

from rl.envs.solvers.controllers import ControllerEvaluator, FiniteStateController, evaluate_controller
from rl.envs.solvers.hmm_control import (
    BeliefOptimalReference,
    ControlReferences,
    GridBeliefController,
    MemorylessPolicy,
    Reference,
    StatePolicy,
    control_references,
)
from rl.envs.solvers.mdp import MDPSolution, QMDPPolicy, qmdp, solve_fully_observable
from rl.envs.solvers.point_based import PointBasedSolution, project_policy, solve_point_based

__all__ = [
    "BeliefOptimalReference",
    "ControlReferences",
    "ControllerEvaluator",
    "FiniteStateController",
    "GridBeliefController",
    "MemorylessPolicy",
    "MDPSolution",
    "PointBasedSolution",
    "QMDPPolicy",
    "Reference",
    "StatePolicy",
    "control_references",
    "evaluate_controller",
    "project_policy",
    "qmdp",
    "solve_fully_observable",
    "solve_point_based",
]
