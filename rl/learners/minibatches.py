"""IndexedMinibatchIterator: RLlib's MiniBatchCyclicIterator with one index per column and minibatch.

    from rl.learners.minibatches import IndexedMinibatchIterator

    iterator = IndexedMinibatchIterator.replacing(iterator)   # a MiniBatchCyclicIterator or anything else

RLlib's iterator shuffles the whole batch in place whenever it completes an epoch (one
`np.random.permutation` of the rows applied to every column), slices SampleBatches
and joins the slices of a minibatch that wraps around an epoch end with
`concat_samples`: per minibatch, a few dozen small copies and SampleBatch
constructions (~0.6 ms a minibatch for the main job's chunked Transformer batch,
~8% of its update). Here the shuffles compose into one permutation of row indices
and a minibatch is one `index_select` per column. The same `np.random` draws happen
at the same points, so the minibatches are RLlib's, value for value and in the same
order (`tests/minibatches_test.py` compares them with RLlib's iterator).
ActorCriticPPOTorchLearner uses it for every batch of torch tensors; anything else
(numpy columns, infos) keeps RLlib's iterator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.minibatch_utils import MiniBatchCyclicIterator, MiniBatchIteratorBase


def _all_tensors(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_all_tensors(item) for item in value.values())
    return isinstance(value, torch.Tensor)


def map_tensors(function: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    """Applies `function` to every tensor in a nest of dicts (the shape of a module batch)."""
    if isinstance(value, dict):
        return {key: map_tensors(function, item) for key, item in value.items()}
    return function(value)


def select_rows(batch: Any, rows: torch.Tensor) -> Any:
    """The given rows (first axis) of every tensor in a nest of dicts, by one `index_select` each."""
    return map_tensors(lambda tensor: tensor.index_select(0, rows), batch)


class IndexedMinibatchIterator(MiniBatchIteratorBase):
    """MiniBatchCyclicIterator's minibatches, each taken with one index per column (module docstring)."""

    def __init__(
        self,
        batch: MultiAgentBatch,
        *,
        num_epochs: int = 1,
        minibatch_size: int,
        shuffle_batch_per_epoch: bool = True,
        num_total_minibatches: int = 0,
    ) -> None:
        super().__init__(
            batch, num_epochs=num_epochs, minibatch_size=minibatch_size, shuffle_batch_per_epoch=shuffle_batch_per_epoch
        )
        self._batch = batch
        self._num_epochs = num_epochs
        self._minibatch_size = minibatch_size
        self._shuffle_batch_per_epoch = shuffle_batch_per_epoch
        self._num_total_minibatches = num_total_minibatches

    @classmethod
    def replacing(cls, iterator: Any) -> Any:
        """An IndexedMinibatchIterator with `iterator`'s settings if it is a MiniBatchCyclicIterator over torch tensors; else `iterator`."""
        if type(iterator) is not MiniBatchCyclicIterator:
            return iterator
        for module_batch in iterator._batch.policy_batches.values():
            if Columns.INFOS in module_batch or not _all_tensors(dict(module_batch)):
                return iterator
        return cls(
            iterator._batch,
            num_epochs=iterator._num_epochs,
            minibatch_size=iterator._minibatch_size,
            shuffle_batch_per_epoch=iterator._shuffle_batch_per_epoch,
            num_total_minibatches=iterator._num_total_minibatches,
        )

    def __iter__(self) -> Iterator[MultiAgentBatch]:
        module_batches = self._batch.policy_batches
        for module_id, module_batch in module_batches.items():
            if len(module_batch) == 0:  # RLlib's iterator would loop forever
                raise ValueError(f"The batch for module_id {module_id} is empty: nothing to build minibatches from.")
        # RLlib slices a batch of chunks (B, T, ...) by chunk, others by step.
        rows = {
            module_id: len(batch[Columns.SEQ_LENS]) if batch._slice_seq_lens_in_B else len(batch)
            for module_id, batch in module_batches.items()
        }
        # The physical order RLlib's in-place shuffles would have put the rows in.
        order = {module_id: torch.arange(count) for module_id, count in rows.items()}
        start = {module_id: 0 for module_id in module_batches}
        covered_epochs = {module_id: 0 for module_id in module_batches}
        minibatch_count = 0
        while (self._num_total_minibatches == 0 and min(covered_epochs.values()) < self._num_epochs) or (
            self._num_total_minibatches > 0 and minibatch_count < self._num_total_minibatches
        ):
            minibatch = {}
            for module_id, module_batch in module_batches.items():
                count = rows[module_id]
                wanted = (
                    int(count * (self._minibatch_size / len(module_batch)))
                    if module_batch._slice_seq_lens_in_B
                    else self._minibatch_size
                )
                first, pieces = start[module_id], []
                while first + wanted >= count:  # to the end of the epoch, then on into the next
                    pieces.append(order[module_id][first:])
                    wanted -= count - first
                    first = 0
                    covered_epochs[module_id] += 1
                    if self._shuffle_batch_per_epoch:
                        order[module_id] = order[module_id][torch.from_numpy(np.random.permutation(count))]
                end = first + wanted
                if end > first:
                    pieces.append(order[module_id][first:end])
                minibatch[module_id] = SampleBatch(
                    select_rows(dict(module_batch), torch.cat(pieces)),
                    _zero_padded=module_batch.zero_padded,
                    _max_seq_len=module_batch.max_seq_len,
                )
                start[module_id] = end
            yield MultiAgentBatch(minibatch, len(self._batch))
            minibatch_count += 1
