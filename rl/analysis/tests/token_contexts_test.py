import numpy as np
import pytest

from rl.analysis.token_contexts import context_groups, count_contexts, enumerate_contexts


def test_every_context_once_length_by_length_in_lexicographic_order():
    batches = list(enumerate_contexts(num_tokens=2, max_length=3, batch_size=3))
    assert [b.tolist() for b in batches] == [
        [[0], [1]],
        [[0, 0], [0, 1], [1, 0]],
        [[1, 1]],
        [[0, 0, 0], [0, 0, 1], [0, 1, 0]],
        [[0, 1, 1], [1, 0, 0], [1, 0, 1]],
        [[1, 1, 0], [1, 1, 1]],
    ]
    assert count_contexts(num_tokens=2, max_length=3) == 2 + 4 + 8
    assert count_contexts(num_tokens=3, max_length=10, min_length=10) == 3**10
    assert sum(len(b) for b in enumerate_contexts(num_tokens=3, max_length=6, batch_size=100, min_length=4)) == (
        3**4 + 3**5 + 3**6
    )


def test_groups_are_subtrees_of_the_prefix_and_shorter_contexts_form_one_more():
    batches = list(enumerate_contexts(num_tokens=3, max_length=4, batch_size=1000))
    contexts = [tuple(row) for batch in batches for row in batch]
    groups = np.concatenate([context_groups(b, num_tokens=3, group_prefix_length=2) for b in batches])
    assert set(groups[:3]) == {9} and 9 not in groups[3:]  # the three length-1 contexts
    by_group = {}
    for context, group in zip(contexts[3:], groups[3:]):
        by_group.setdefault(group, set()).add(context[:2])
    assert sorted(by_group) == list(range(9)) and all(len(prefixes) == 1 for prefixes in by_group.values())


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="num_tokens"):
        count_contexts(num_tokens=1, max_length=3)
    with pytest.raises(ValueError, match="min_length <= max_length"):
        next(enumerate_contexts(num_tokens=3, max_length=2, min_length=3, batch_size=10))
    with pytest.raises(ValueError, match="group_prefix_length"):
        context_groups(np.zeros((1, 2), dtype=int), num_tokens=3, group_prefix_length=0)
