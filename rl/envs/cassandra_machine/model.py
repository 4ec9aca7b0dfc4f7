"""Cassandra's four-component machine-maintenance POMDP, built from its per-component structure.

    pomdp = machine_pomdp()                 # equals load_pomdp("machine.POMDP") entry for entry
    exact = machine_pomdp(decimals=None)    # the same model before the file's 6-decimal rounding
    predicted = predict_belief(beliefs, action)     # factored prediction step, beliefs (..., 256)
    marginals = component_marginals(beliefs)        # (..., 4, 4): P(component k in condition c)

State s = sum_k c_k * 4**k for components k = 0..3 in condition c_k (0 broken, 1 bad, 2 fair,
3 good); 255 is all good, the start. Every action's transition matrix is the Kronecker power of
one 4x4 per-component matrix; observations and operate rewards are products over components.
Actions (the file is numeric; names are interpretation): 0 operate, 1 inspect, 2 repair, 3 replace.
Observation symbols keep the file's numbers: after operate 15 ("all fine") or 0; after inspect
four bits, bit k set with a probability that depends on component k; after repair and
replace always 0. See README.md for the semantics and sources.
"""

from __future__ import annotations

import functools

import numpy as np

from rl.envs.pomdp.model import FinitePOMDP

NUM_COMPONENTS = 4
CONDITIONS = ("broken", "bad", "fair", "good")
ACTION_NAMES = ("operate", "inspect", "repair", "replace")
NUM_STATES = len(CONDITIONS) ** NUM_COMPONENTS
NUM_OBSERVATIONS = 2**NUM_COMPONENTS
START_STATE = NUM_STATES - 1
DISCOUNT = 0.999
FILE_DECIMALS = 6  # machine.POMDP prints every number with 6 decimals

# COMPONENT_TRANSITIONS[a, c, c2] = P(component goes from condition c to c2 | action a)
COMPONENT_TRANSITIONS = np.array(
    [
        [[1.0, 0, 0, 0], [0.03, 0.97, 0, 0], [0, 0.03, 0.97, 0], [0, 0, 0.03, 0.97]],  # operate: wear
        np.eye(4),  # inspect
        [[1.0, 0, 0, 0], [0, 0.2, 0.8, 0], [0, 0, 0.2, 0.8], [0, 0, 0, 1.0]],  # repair: broken stays broken
        [[0, 0, 0, 1.0]] * 4,  # replace: as new
    ]
)
OPERATE_FINE_PROBABILITY = np.array([0.0, 0.75, 0.95, 1.0])  # symbol 15 needs every component to pass
INSPECT_BIT_PROBABILITY = np.array([0.02, 0.05, 0.80, 0.97])  # bit k set given component k's condition
OPERATE_REWARD_FACTOR = np.array([0.0, 0.7275, 0.944, 0.9985])  # operate pays the product over components
ACTION_REWARDS = (None, -1.0, -3.0, -15.0)  # inspect, repair and replace cost the same in every state
OPERATE_FINE_SYMBOL = 15
QUIET_SYMBOL = 0


def _kronecker_power(array: np.ndarray) -> np.ndarray:
    """The product over components, indexed like states: component 3 is the most significant digit.

    Folded from the right, so each entry is the floating-point product ((x0 * x1) * x2) * x3: the
    order in which the file's numbers were computed, which decides how 6-decimal ties round.
    """
    return functools.reduce(lambda inner, outer: np.kron(outer, inner), [array] * NUM_COMPONENTS)


def _round_like_printf(array: np.ndarray, decimals: int) -> np.ndarray:
    """Rounds as C's printf("%.6f") does (correctly, from the binary value), unlike np.round at ties."""
    rounded = array.copy()
    nonzero = np.nonzero(array)
    rounded[nonzero] = [float(f"{value:.{decimals}f}") for value in array[nonzero]]
    return rounded


@functools.cache  # the model is immutable: every env shares one copy
def machine_pomdp(decimals: int | None = FILE_DECIMALS) -> FinitePOMDP:
    """The machine POMDP as dense arrays; `decimals` rounds like the distributed file (None: exact).

    With the default the arrays equal `load_pomdp("machine.POMDP")` (rows then sum to one within
    4e-6, as in the file); `decimals=None` gives the exactly stochastic model the file rounds,
    which CassandraMachineEnv simulates.
    """
    transitions = np.stack([_kronecker_power(matrix) for matrix in COMPONENT_TRANSITIONS])
    observations = np.zeros((len(ACTION_NAMES), NUM_STATES, NUM_OBSERVATIONS))
    fine = _kronecker_power(OPERATE_FINE_PROBABILITY)
    observations[0, :, OPERATE_FINE_SYMBOL] = fine
    observations[0, :, QUIET_SYMBOL] = 1.0 - fine
    # bit k of the symbol reports component k, so symbols are digits like states: a Kronecker power
    observations[1] = _kronecker_power(np.stack([1.0 - INSPECT_BIT_PROBABILITY, INSPECT_BIT_PROBABILITY], axis=1))
    observations[2:, :, QUIET_SYMBOL] = 1.0
    rewards = np.stack([_kronecker_power(OPERATE_REWARD_FACTOR)] + [np.full(NUM_STATES, r) for r in ACTION_REWARDS[1:]])
    start = np.zeros(NUM_STATES)
    start[START_STATE] = 1.0
    if decimals is not None:
        transitions, observations, rewards = (
            _round_like_printf(array, decimals) for array in (transitions, observations, rewards)
        )
    return FinitePOMDP(
        transitions=transitions,
        observations=observations,
        rewards=rewards[:, :, None, None],  # depends on (action, state) only
        start=start,
        discount=DISCOUNT,
    )


# Pairs of components at once: kron(M, M) acts on the (c3 c2) and (c1 c0) halves of the index.
_HALF = len(CONDITIONS) ** (NUM_COMPONENTS // 2)
_HALF_TRANSITIONS = np.stack([np.kron(matrix, matrix) for matrix in COMPONENT_TRANSITIONS])
_HALF_TRANSITIONS_TRANSPOSED = np.ascontiguousarray(_HALF_TRANSITIONS.transpose(0, 2, 1))


def predict_belief(beliefs: np.ndarray, action: int) -> np.ndarray:
    """sum_s b(s) T[a, s, :] for beliefs (..., 256), exploiting T[a] = kron(M, M, M, M).

    With B the belief as a 16x16 matrix over (c3 c2, c1 c0), the prediction is K^T B K for
    K = kron(M, M): two 16x16 products instead of a 256x256 one.
    """
    beliefs = np.asarray(beliefs)
    matrix = beliefs.reshape(*beliefs.shape[:-1], _HALF, _HALF)
    return (_HALF_TRANSITIONS_TRANSPOSED[action] @ matrix @ _HALF_TRANSITIONS[action]).reshape(beliefs.shape)


# _DIGIT_INDICATOR[s, k * 4 + c] = 1 when component k of state s is in condition c
_DIGIT_INDICATOR = (
    np.stack([(np.arange(NUM_STATES)[:, None] // 4**k % 4) == np.arange(4) for k in range(NUM_COMPONENTS)], axis=1)
    .reshape(NUM_STATES, -1)
    .astype(np.float64)
)


def component_marginals(beliefs: np.ndarray) -> np.ndarray:
    """P(component k in condition c) for beliefs (..., 256): shape (..., 4, 4), rows k, columns c.

    One product with the indicator of each state's base-4 digits. Marginals drop the correlations
    between components (see README.md).
    """
    return (np.asarray(beliefs) @ _DIGIT_INDICATOR).reshape(*np.shape(beliefs)[:-1], NUM_COMPONENTS, len(CONDITIONS))
