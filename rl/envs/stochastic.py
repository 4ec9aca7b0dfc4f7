"""Checks, normalisation and sampling for the stochastic arrays every model in rl.envs is built from.

require_stochastic(matrix, name="transition", sum_axes=(1,))        # rows of a (S, S) matrix
sampler = RowSampler(matrix)                                       # inverse-CDF sampling per row
next_state = sampler.sample(row=state, uniform=rng.random())
belief = normalize(belief @ matrix, impossible=lambda row: "observation 3 after action 1")
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

# Files such as Cassandra's machine.POMDP print probabilities with 6 decimals, so their rows
# sum to one only within a few 1e-6; anything further off is an error in the model.
ROW_SUM_TOLERANCE = 1e-5


def _describe_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def require_stochastic(
    array: np.ndarray,
    *,
    name: str,
    sum_axes: Sequence[int],
    describe_row: Callable[[tuple[int, ...]], str] = _describe_index,
    tolerance: float = ROW_SUM_TOLERANCE,
) -> None:
    """Raises ValueError unless `array` is finite, nonnegative and sums to one over `sum_axes`.

    The message names the offending entry or row (through `describe_row`, which receives the
    index over the axes that are not summed) and the fix.
    """
    array = np.asarray(array, dtype=np.float64)
    bad = np.argwhere(~np.isfinite(array) | (array < 0))
    if bad.size:
        index = tuple(int(i) for i in bad[0])
        raise ValueError(
            f"{name}{_describe_index(index)} = {float(array[index])!r}: probabilities must be finite and nonnegative"
        )
    sums = np.atleast_1d(array.sum(axis=tuple(sum_axes)))  # a single vector has one "row", index (0,)
    bad = np.argwhere(np.abs(sums - 1.0) > tolerance)
    if bad.size:
        index = tuple(int(i) for i in bad[0])
        raise ValueError(
            f"{name}: row {describe_row(index)} sums to {sums[index]:.9g}; each row must sum to 1 "
            f"(within {tolerance:g}); {len(bad)} row(s) are off"
        )


def normalize(unnormalized: np.ndarray, impossible: Callable[[tuple[int, ...]], str]) -> np.ndarray:
    """Divides each vector along the last axis by its sum (a Bayes filter's evidence step).

    A vector summing to zero means the conditioning event is impossible: ValueError with the
    text `impossible(batch_index)` returns for the first such vector.
    """
    if unnormalized.ndim == 1:  # one vector: the cheapest numpy calls (single envs call this every step)
        total = unnormalized.sum()
        if not total > 0:
            raise ValueError(f"{impossible(())} has probability zero under the current belief")
        return unnormalized / total
    # A matrix-vector product sums short rows several times faster than ndarray.sum(axis=-1).
    totals = unnormalized @ np.ones(unnormalized.shape[-1])
    if not np.all(totals > 0):
        index = tuple(int(i) for i in np.argwhere(~(totals > 0))[0])
        raise ValueError(f"{impossible(index)} has probability zero under the current belief")
    return unnormalized * (1.0 / totals)[..., None]


class RowSampler:
    """Draws a column index from any row of a row-stochastic table (inverse CDF, bisection).

    Rows are renormalised for sampling, so tables within ROW_SUM_TOLERANCE of stochastic sample
    exactly in proportion to their entries. Pure-Python bisection on cached CDF lists is several
    times faster than numpy calls for one draw at a time, which is what a single env does.

        sampler = RowSampler(np.array([[0.9, 0.1], [0.5, 0.5]]))
        column = sampler.sample(row=0, uniform=rng.random())
    """

    def __init__(self, table: np.ndarray):
        table = np.asarray(table, dtype=np.float64)
        table = table.reshape(-1, table.shape[-1])
        cdf = np.cumsum(table, axis=1)
        cdf /= cdf[:, -1:]
        self._cdf = cdf.tolist()

    def sample(self, row: int, uniform: float) -> int:
        """The column whose CDF interval holds `uniform` in [0, 1); zero-probability columns never come up."""
        return bisect.bisect_right(self._cdf[row], uniform)
