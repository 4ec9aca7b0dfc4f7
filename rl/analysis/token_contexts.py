"""Every token context up to a length, in batches, for probing on the uniform-context distribution.

    from rl.analysis.token_contexts import context_groups, count_contexts, enumerate_contexts

    count_contexts(num_tokens=3, max_length=10)                 # 88572 = 3 + 9 + ... + 3**10
    for batch in enumerate_contexts(num_tokens=3, max_length=10, batch_size=4096):
        batch.shape                                             # (<= 4096, m): one length per batch
        context_groups(batch, num_tokens=3, group_prefix_length=4)   # ids of the context trees

Contexts come length by length, each length in lexicographic order. A context that extends
another is a later position of the same sequence, so a split must keep them together:
`context_groups` puts every context whose first `group_prefix_length` tokens agree in one
group (a subtree of the context tree) and all shorter contexts (the few ancestors of every
subtree) together in one more group.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def count_contexts(*, num_tokens: int, max_length: int, min_length: int = 1) -> int:
    _check(num_tokens, max_length, min_length)
    return sum(num_tokens**length for length in range(min_length, max_length + 1))


def enumerate_contexts(
    *, num_tokens: int, max_length: int, batch_size: int, min_length: int = 1
) -> Iterator[np.ndarray]:
    """Yields int64 arrays (batch, length) covering each context of min_length..max_length once."""
    _check(num_tokens, max_length, min_length)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for length in range(min_length, max_length + 1):
        place_values = num_tokens ** np.arange(length - 1, -1, -1, dtype=np.int64)
        for start in range(0, num_tokens**length, batch_size):
            index = np.arange(start, min(start + batch_size, num_tokens**length), dtype=np.int64)
            yield (index[:, None] // place_values) % num_tokens


def context_groups(contexts: np.ndarray, *, num_tokens: int, group_prefix_length: int) -> np.ndarray:
    """Group id per context: its first `group_prefix_length` tokens read as a base-`num_tokens`
    number (0..K**g - 1), or K**g for every context shorter than that."""
    if group_prefix_length < 1:
        raise ValueError(f"group_prefix_length must be >= 1, got {group_prefix_length}")
    if contexts.shape[1] < group_prefix_length:
        return np.full(len(contexts), num_tokens**group_prefix_length, dtype=np.int64)
    return contexts[:, :group_prefix_length] @ (
        num_tokens ** np.arange(group_prefix_length - 1, -1, -1, dtype=np.int64)
    )


def _check(num_tokens: int, max_length: int, min_length: int) -> None:
    if num_tokens < 2:
        raise ValueError(f"num_tokens must be >= 2, got {num_tokens}")
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got {min_length} and {max_length}")
