"""Reference solvers for any FinitePOMDP: bounds, QMDP, controllers and a point-based solver.

    from rl.envs.solvers import solve_fully_observable, qmdp, solve_point_based, evaluate_controller
    upper = solve_fully_observable(pomdp).value(pomdp.start)     # fully observable MDP optimum
    lower = solve_point_based(pomdp, seed=0).start_value         # value of an executable policy
"""

from rl.envs.solvers.controllers import ControllerEvaluator, FiniteStateController, evaluate_controller
from rl.envs.solvers.mdp import MDPSolution, QMDPPolicy, qmdp, solve_fully_observable
from rl.envs.solvers.point_based import PointBasedSolution, project_policy, solve_point_based

__all__ = [
    "ControllerEvaluator",
    "FiniteStateController",
    "MDPSolution",
    "PointBasedSolution",
    "QMDPPolicy",
    "evaluate_controller",
    "project_policy",
    "qmdp",
    "solve_fully_observable",
    "solve_point_based",
]
