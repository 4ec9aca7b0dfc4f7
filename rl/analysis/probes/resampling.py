"""Group-aware splitting and resampling: episodes (or context trees) are the unit, never rows.

from rl.analysis.probes.resampling import GroupPermuter, GroupSums, cluster_bootstrap, split_by_group

split = split_by_group(groups, test_fraction=0.2, rng=np.random.default_rng(0))
permuter = GroupPermuter(groups[split.train])        # swaps whole groups of equal size
source_rows = permuter.draw(rng)                     # targets[split.train][source_rows]
permuter.permutable_fraction                         # the share of rows that can move
sums = GroupSums.of(predictions - targets, targets, groups[split.test])
intervals = cluster_bootstrap(sums, num_resamples=1000, confidence=0.95, rng=rng)
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class GroupSplit:
    """Row indices of train and test, each ordered by group and, within a group, by row."""

    train: np.ndarray
    test: np.ndarray
    num_train_groups: int
    num_test_groups: int


# Fewer held-out groups make the cluster bootstrap (and the held-out score) unreliable.
MIN_GROUPS_PER_SIDE = 10


def split_by_group(groups: np.ndarray, *, test_fraction: float, rng: np.random.Generator) -> GroupSplit:
    """Holds out round(test_fraction * #groups) whole groups; each side needs MIN_GROUPS_PER_SIDE."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    unique = np.unique(groups)
    num_test = int(round(test_fraction * len(unique)))
    if min(num_test, len(unique) - num_test) < MIN_GROUPS_PER_SIDE:
        raise ValueError(
            f"{len(unique)} groups (episodes / context trees) split {len(unique) - num_test}:{num_test} at "
            f"test_fraction={test_fraction}; each side needs at least {MIN_GROUPS_PER_SIDE} for the held-out "
            "score and its cluster bootstrap: collect more episodes or use a longer group prefix"
        )
    test_groups = rng.choice(unique, size=num_test, replace=False)
    is_test = np.isin(groups, test_groups)
    return GroupSplit(
        train=_rows_by_group(groups, ~is_test),
        test=_rows_by_group(groups, is_test),
        num_train_groups=len(unique) - num_test,
        num_test_groups=num_test,
    )


def _rows_by_group(groups: np.ndarray, selected: np.ndarray) -> np.ndarray:
    rows = np.flatnonzero(selected)
    return rows[np.lexsort((rows, groups[rows]))]


class GroupPermuter:
    """Reassigns whole groups' targets to other groups of the same size, row by row.

    This null keeps everything about the targets that does not depend on the activations (their
    autocorrelation within an episode, how they change with position) and breaks only which
    episode's activations they belong to. Groups whose size no other group shares cannot move;
    `draw` reports the fraction of rows that were permutable.
    """

    def __init__(self, row_groups: np.ndarray):
        if np.any(row_groups[1:] < row_groups[:-1]):
            raise ValueError("rows must be ordered by group; pass the rows in GroupSplit order")
        _, starts, sizes = np.unique(row_groups, return_index=True, return_counts=True)
        self._starts, self._sizes = starts, sizes
        self._strata = [np.flatnonzero(sizes == size) for size in np.unique(sizes)]
        self._strata = [stratum for stratum in self._strata if len(stratum) > 1]
        if not self._strata:
            raise ValueError(
                "no two training groups have the same number of rows, so no group can be permuted; "
                "collect fixed-length episodes (or truncate them to a common length)"
            )
        self.permutable_fraction = sum(sizes[s].sum() for s in self._strata) / len(row_groups)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """Row indices: row i takes the target of row `draw()[i]`."""
        source = np.arange(self._sizes.sum())
        for stratum in self._strata:
            donors = rng.permutation(stratum)
            size = self._sizes[stratum[0]]
            offsets = np.arange(size)
            source[(self._starts[stratum][:, None] + offsets).ravel()] = (
                self._starts[donors][:, None] + offsets
            ).ravel()
        return source


@dataclasses.dataclass(frozen=True)
class GroupSums:
    """Per held-out group: rows, summed squared error, target sums and summed squared targets."""

    num_rows: np.ndarray  # (groups,)
    squared_error: np.ndarray  # (groups,)
    target_sum: np.ndarray  # (groups, target_dim)
    target_squares: np.ndarray  # (groups,)

    @classmethod
    def of(cls, errors: np.ndarray, targets: np.ndarray, row_groups: np.ndarray) -> GroupSums:
        _, index = np.unique(row_groups, return_inverse=True)
        num_groups = index.max() + 1
        target_sum = np.zeros((num_groups, targets.shape[1]))
        np.add.at(target_sum, index, targets)
        return cls(
            num_rows=np.bincount(index, minlength=num_groups).astype(np.float64),
            squared_error=np.bincount(index, weights=(errors**2).sum(axis=1), minlength=num_groups),
            target_sum=target_sum,
            target_squares=np.bincount(index, weights=(targets**2).sum(axis=1), minlength=num_groups),
        )


def cluster_bootstrap(
    sums: GroupSums, *, num_resamples: int, confidence: float, rng: np.random.Generator
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of held-out `mse` and `r2`, resampling whole groups with replacement.

    The fitted probe is held fixed: the interval is the uncertainty due to the finite set of
    held-out episodes, not the variability of the fit itself.
    """
    num_groups = len(sums.num_rows)
    counts = rng.multinomial(num_groups, np.full(num_groups, 1.0 / num_groups), size=num_resamples)
    target_dim = sums.target_sum.shape[1]
    elements = (counts @ sums.num_rows) * target_dim
    mse = (counts @ sums.squared_error) / elements
    mean = (counts @ sums.target_sum) / (counts @ sums.num_rows)[:, None]
    variance = (counts @ sums.target_squares) / elements - (mean**2).mean(axis=1)
    r2 = 1.0 - mse / variance
    tail = (1.0 - confidence) / 2.0
    return {
        name: (float(np.quantile(values, tail)), float(np.quantile(values, 1.0 - tail)))
        for name, values in (("mse", mse), ("r2", r2))
    }
