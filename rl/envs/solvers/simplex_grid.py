"""A regular grid on the belief simplex with Freudenthal interpolation (Lovejoy 1991).

    grid = SimplexGrid(num_states=3, resolution=100)    # every belief n / 100 with integer n summing to 100
    grid.points                                         # (num_points, num_states)
    vertices, weights = grid.interpolation(beliefs)    # (..., num_states) each: beliefs = weights @ points[vertices]

Each belief lies in one simplex of Freudenthal's triangulation of the grid; its interpolation
weights are its barycentric coordinates there (nonnegative, summing to one). Interpolating a
convex function (a POMDP value function) from its grid values over-estimates it, which is what
makes grid value iteration an upper bound.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np


class SimplexGrid:
    """The points n / resolution of the simplex (n: nonnegative integers summing to resolution)."""

    def __init__(self, num_states: int, resolution: int):
        if num_states < 1 or resolution < 1:
            raise ValueError(f"num_states={num_states}, resolution={resolution}: both must be >= 1")
        self.num_states = num_states
        self.resolution = resolution
        # Stars and bars: the bar positions of each composition of `resolution` into num_states parts.
        combinations = itertools.combinations(range(resolution + num_states - 1), num_states - 1)
        bars = np.array(list(combinations), dtype=np.int64).reshape(self.num_points(num_states, resolution), -1)
        edges = np.hstack([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), resolution + num_states - 1)])
        counts = np.diff(edges, axis=1) - 1
        self.points = counts / resolution
        self.points.flags.writeable = False
        keys = self._keys(counts)
        self._order = np.argsort(keys)
        self._sorted_keys = keys[self._order]

    @staticmethod
    def num_points(num_states: int, resolution: int) -> int:
        """How many points a grid would have, before building it: C(resolution + S - 1, S - 1)."""
        return math.comb(resolution + num_states - 1, num_states - 1)

    @functools.cached_property
    def _key_base(self) -> np.ndarray:
        if (self.resolution + 1) ** self.num_states >= 2**62:
            raise ValueError(
                f"a grid of resolution {self.resolution} on {self.num_states} states is too large to index; "
                "lower the resolution"
            )
        return (self.resolution + 1) ** np.arange(self.num_states, dtype=np.int64)

    def _keys(self, counts: np.ndarray) -> np.ndarray:
        return counts @ self._key_base

    def interpolation(self, beliefs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vertex indices and weights, each (..., num_states), with beliefs = sum_v weights[v] points[vertices[v]].

        Lovejoy's construction: in the coordinates x_i = N * sum_{j >= i} b_j the grid is the
        integer lattice; from floor(x) add one to coordinates in order of decreasing fractional part.
        """
        beliefs = np.asarray(beliefs, dtype=np.float64)
        shape = beliefs.shape
        flat = beliefs.reshape(-1, self.num_states)
        size = self.resolution
        x = np.clip(size * np.cumsum(flat[:, ::-1], axis=1)[:, ::-1], 0.0, size)
        x[:, 0] = size  # exactly: beliefs sum to one
        base = np.floor(x)
        fraction = x - base
        sortable = fraction.copy()
        sortable[:, 0] = -1.0  # coordinate 0 is never incremented (its fraction is zero): keep it last
        order = np.argsort(-sortable, axis=1, kind="stable")
        sorted_fraction = np.take_along_axis(fraction, order, axis=1)
        weights = np.empty_like(flat)
        weights[:, 0] = 1.0 - sorted_fraction[:, 0]
        weights[:, 1:] = sorted_fraction[:, :-1] - sorted_fraction[:, 1:]
        # vertex k: base plus one on the first k coordinates of `order`
        steps = np.zeros((len(flat), self.num_states, self.num_states))
        rows = np.arange(len(flat))
        for k in range(1, self.num_states):
            steps[:, k] = steps[:, k - 1]
            steps[rows, k, order[:, k - 1]] += 1.0
        # A vertex of weight zero may step off the grid (a coordinate with no fraction incremented);
        # it stands in as the base point, which always lies on the grid.
        steps[weights == 0.0] = 0.0
        lattice = (base[:, None, :] + steps).astype(np.int64)  # (n, vertex, x-coordinate)
        counts = lattice - np.concatenate([lattice[:, :, 1:], np.zeros_like(lattice[:, :, :1])], axis=2)
        vertices = self._order[np.searchsorted(self._sorted_keys, self._keys(counts))]
        return vertices.reshape(shape), weights.reshape(shape)
