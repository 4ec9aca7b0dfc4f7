"""Reference solvers on machine.POMDP against the bounds of the shared notes (section 1)."""

import pathlib

import numpy as np
import pytest

from rl.envs.pomdp import load_pomdp
from rl.envs.solvers import FiniteStateController, evaluate_controller, qmdp, solve_fully_observable, solve_point_based

MACHINE = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "machine.POMDP"
# Shared notes, section 1 (values from state 255, discount 0.999)
MDP_UPPER_BOUND = 661.86
OPEN_LOOP_LOWER_BOUND = 373.37  # operate 44 times, then replace, forever
ALWAYS_OPERATE = 37.47
OPERATE, REPLACE = 0, 3


@pytest.fixture(scope="module")
def machine():
    return load_pomdp(MACHINE)


def test_fully_observable_value_and_qmdp(machine):
    mdp = solve_fully_observable(machine)
    assert mdp.value(machine.start) == pytest.approx(MDP_UPPER_BOUND, abs=0.005)
    policy = qmdp(machine)
    assert policy.value(machine.start) == pytest.approx(MDP_UPPER_BOUND, abs=0.005)  # equal at a known state
    assert policy.action(machine.start) == OPERATE
    belief = np.full(256, 1 / 256)  # max_a E_b Q <= E_b max_a Q: QMDP is the tighter upper bound
    assert policy.value(belief) <= mdp.value(belief) + 1e-9


def test_controller_values_reproduce_the_open_loop_policies(machine):
    always_operate = FiniteStateController(actions=[OPERATE], successors=np.zeros((1, 16), int))
    assert (evaluate_controller(machine, always_operate) @ machine.start)[0] == pytest.approx(ALWAYS_OPERATE, abs=0.005)
    cycle = FiniteStateController(
        actions=[OPERATE] * 44 + [REPLACE], successors=np.repeat((np.arange(1, 46) % 45)[:, None], 16, axis=1)
    )
    assert (evaluate_controller(machine, cycle) @ machine.start)[0] == pytest.approx(OPEN_LOOP_LOWER_BOUND, abs=0.005)


def test_point_based_value_lies_between_the_bounds(machine):
    solution = solve_point_based(machine, seed=0)
    assert OPEN_LOOP_LOWER_BOUND < solution.start_value < MDP_UPPER_BOUND
    assert solution.value(machine.start) == solution.start_value
    # every alpha vector is the exact value of a node of the returned controller
    np.testing.assert_allclose(evaluate_controller(machine, solution.controller), solution.alpha_vectors, atol=1e-6)
    assert solution.action(machine.start) == OPERATE


def test_discount_one_is_rejected(machine):
    undiscounted = load_pomdp(
        "discount: 1.0\nvalues: reward\nstates: 1\nactions: 1\nobservations: 1\nT: 0 identity\nO: 0 uniform\n"
    )
    with pytest.raises(ValueError, match="discount < 1"):
        solve_fully_observable(undiscounted)
    with pytest.raises(ValueError, match="discount < 1"):
        solve_point_based(undiscounted)
