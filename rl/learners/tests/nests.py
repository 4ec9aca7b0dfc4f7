"""Nests of dicts and lists (an episode's model outputs, a recurrent state) compared leaf by leaf.

from rl.learners.tests.nests import assert_same_nest, leaves

assert_same_nest(expected, actual)   # the same paths, dtypes, shapes and values
"""

from __future__ import annotations

import numpy as np


def leaves(nest, path=()):
    """(path, leaf) pairs of a nest of dicts and lists, dict keys sorted."""
    if isinstance(nest, dict):
        for key in sorted(nest):
            yield from leaves(nest[key], (*path, key))
    elif isinstance(nest, (list, tuple)):
        for index, item in enumerate(nest):
            yield from leaves(item, (*path, index))
    else:
        yield path, nest


def assert_same_nest(expected, actual):
    expected_leaves, actual_leaves = list(leaves(expected)), list(leaves(actual))
    assert [path for path, _ in expected_leaves] == [path for path, _ in actual_leaves]
    for (path, want), (_, got) in zip(expected_leaves, actual_leaves):
        want, got = np.asarray(want), np.asarray(got)
        assert (want.dtype, want.shape) == (got.dtype, got.shape), path
        assert np.array_equal(want, got), path
