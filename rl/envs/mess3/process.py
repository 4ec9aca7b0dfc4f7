"""Mess3 (Marzen & Crutchfield, arXiv 1702.08565), the process of Shai et al. 2024.

    model = mess3_process()                # x = 0.05, a = 0.85 (Shai et al.'s figures)
    xy = simplex_coordinates(beliefs)      # (..., 2) points of the belief triangle, for plotting

Edge-emitting: T[k][i, j] = (y if i == j else x) * (a if k == j else b), y = 1 - 2x,
b = (1 - a) / 2; the destination state emits the token.
"""

from __future__ import annotations

import numpy as np

from rl.envs.hmm.model import FiniteHMM


def mess3_process(x: float = 0.05, a: float = 0.85) -> FiniteHMM:
    """The canonical Mess3 edge-emitting HMM (3 states, 3 tokens).

    `x` is the probability of moving to each other state (0 <= x <= 1/2); `a` the probability
    that the destination state emits its own token (0 <= a <= 1).
    """
    if not 0.0 <= x <= 0.5:
        raise ValueError(f"x={x}; Mess3 needs 0 <= x <= 0.5 (x is each off-diagonal transition probability)")
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"a={a}; Mess3 needs 0 <= a <= 1 (a is the probability of emitting the state's own token)")
    moves = np.full((3, 3), x) + np.eye(3) * (1.0 - 3.0 * x)
    emissions = np.full((3, 3), (1.0 - a) / 2.0) + np.eye(3) * (a - (1.0 - a) / 2.0)
    return FiniteHMM.from_state_emitting(moves, emissions, emitted_by="destination")


def simplex_coordinates(beliefs: np.ndarray) -> np.ndarray:
    """Maps 3-state beliefs (..., 3) to the plane: x = p1 + p2 / 2, y = sqrt(3) / 2 * p2.

    The vertices land on (0, 0), (1, 0) and (1/2, sqrt(3)/2): an equilateral triangle.
    """
    beliefs = np.asarray(beliefs, dtype=np.float64)
    if beliefs.shape[-1:] != (3,):
        raise ValueError(f"beliefs have shape {beliefs.shape}; expected (..., 3)")
    return np.stack([beliefs[..., 1] + beliefs[..., 2] / 2.0, np.sqrt(3.0) / 2.0 * beliefs[..., 2]], axis=-1)
