"""GAE for a whole batch at once: RLlib's advantages and value targets, with the backward recursion over episodes in step.

    from rl.learners.advantages import value_targets, use_batched_advantages

    targets = value_targets(values, rewards, terminateds, truncateds, episode_lens=[65, 65], gamma=0.99, lambda_=0.95)
    use_batched_advantages(learner_connector_pipeline)   # ActorCriticPPOTorchLearner does it when built

RLlib's GeneralAdvantageEstimation runs GAE's recursion one step at a time over the
concatenated episodes of a batch: 2,080 Python iterations for the main job's update (32
episodes of 64 steps plus the bootstrap step AddOneTsToEpisodesAndTruncate appends).
`value_targets` lays the episodes out as rows of an (episodes, longest) block and runs
the recursion over the block's columns, all episodes in step: 65 iterations. Every number
is computed with the same operations in the same order as RLlib's `compute_value_targets`,
including the value that the last step of one episode reads from the next (masked out of
the loss, but part of the advantages' standardisation), so the results are equal bit for
bit (`tests/advantages_test.py`).

RLlib's GAE also encodes the whole train batch again for its values (`compute_values`),
though the EnvRunner encoded every step while sampling. ActorCriticModule's exploration
returns the critic's embedding of each step (`CRITIC_EMBEDDINGS`), and `batch_values`
applies only the value head to them, encoding just each episode's bootstrap step, which was
never sampled. The values equal the value pass's to float tolerance (the step-by-step and the
chunked attention add in different orders; `tests/advantages_test.py`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor
from ray.rllib.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from ray.rllib.connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.annotations import override
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.postprocessing.zero_padding import unpad_data_if_necessary

from rl.learners.minibatches import select_rows
from rl.learners.models.base import CRITIC_EMBEDDINGS, ActorCriticModule


def value_targets(
    values: np.ndarray,
    rewards: np.ndarray,
    terminateds: np.ndarray,
    truncateds: np.ndarray,
    *,
    episode_lens: list[int],
    gamma: float,
    lambda_: float,
) -> np.ndarray:
    """RLlib's `compute_value_targets` over concatenated episodes of `episode_lens` steps (flat arrays, float32 out).

    Example:
        value_targets(np.zeros(3, np.float32), np.ones(3, np.float32), np.array([0, 0, 1.0]), np.zeros(3),
                      episode_lens=[3], gamma=1.0, lambda_=1.0)      # array([3., 2., 1.], dtype=float32)
    """
    non_terminal = 1.0 - terminateds
    propagate = non_terminal * (1.0 - truncateds)
    next_values = np.append(values[1:], 0.0)
    residuals = rewards + gamma * non_terminal * next_values - values
    lengths = np.asarray(episode_lens)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    columns = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    block = np.zeros((len(lengths), int(lengths.max(initial=0))), dtype=residuals.dtype)
    # In propagate's dtype, as RLlib multiplies by it: 0 past an episode's end, nothing flows back from the padding.
    carry = np.zeros(block.shape, dtype=propagate.dtype)
    block[rows, columns] = residuals
    carry[rows, columns] = propagate
    running_block = np.zeros(block.shape, dtype=residuals.dtype)
    running = np.zeros(len(lengths), dtype=residuals.dtype)
    for step in reversed(range(block.shape[1])):
        running = block[:, step] + gamma * lambda_ * carry[:, step] * running
        running_block[:, step] = running
    _carry_across_episodes(running_block, block, carry, lengths, gamma * lambda_)
    return (running_block.astype(np.float32)[rows, columns] + values).astype(np.float32)


def _carry_across_episodes(
    running_block: np.ndarray, block: np.ndarray, carry: np.ndarray, lengths: np.ndarray, decay: float
) -> None:
    """Where an episode's last step does not stop the recursion, RLlib's flat recursion carries the next
    episode's first advantage into it: AddOneTsToEpisodesAndTruncate's bootstrap step has neither flag.
    Redoes those tails, from the last episode back, up to the first step that stops the recursion."""
    incoming = None  # the later episode's first running advantage
    for row in reversed(range(len(lengths))):
        if incoming is not None and lengths[row] and carry[row, lengths[row] - 1] != 0:
            running = incoming
            for step in reversed(range(lengths[row])):
                running = block[row, step] + decay * carry[row, step] * running
                running_block[row, step] = running
                if carry[row, step] == 0:
                    break
        incoming = running_block[row, 0] if lengths[row] else incoming


def zero_padded_episode_chunks(values: np.ndarray, episode_lens: list[int], max_seq_len: int) -> np.ndarray:
    """`np.stack(split_and_zero_pad_n_episodes(values, episode_lens, max_seq_len))` with one scatter: each
    episode's steps cut into `max_seq_len` chunks, its last chunk zero-padded; (chunks, max_seq_len, ...).

    Example:
        zero_padded_episode_chunks(np.arange(5.0), [3, 2], 2)    # [[0, 1], [2, 0], [3, 4]]
    """
    rows, columns, chunks = _chunk_positions(episode_lens, max_seq_len)
    padded = np.zeros((chunks, max_seq_len, *values.shape[1:]), dtype=values.dtype)
    padded[rows, columns] = values
    return padded


def _chunk_positions(episode_lens: list[int], max_seq_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Each step's chunk row and column when every episode is cut into its own `max_seq_len` chunks; the chunk count."""
    lengths = np.asarray(episode_lens)
    chunks = -(-lengths // max_seq_len)
    offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows = np.repeat(np.cumsum(chunks) - chunks, lengths) + offsets // max_seq_len
    return rows, offsets % max_seq_len, int(chunks.sum())


def batch_values(module: Any, module_batch: dict[str, Any], episode_lens: list[int]) -> Any:
    """The value of every step of a Learner batch, in its layout: (B, T) chunks or (N,) steps.

    With the critic's embeddings from sampling (`CRITIC_EMBEDDINGS`, popped from the batch) only
    the value head runs, and the encoder only on the chunks (or steps) that hold a bootstrap step
    (the step AddOneTsToEpisodesAndTruncate appends, never sampled: its embedding is a copy of
    the last step's) and on the first one with a loss step. That one checks that the embeddings
    come from this module's weights: if its sampled values differ from the encoded ones
    (episodes from an EnvRunner not synced since the last update), `compute_values` encodes the
    whole batch, as it does without embeddings.

    Example:
        values = batch_values(module, module_batch, episode_lens=[65, 65])
    """
    embeddings = module_batch.pop(CRITIC_EMBEDDINGS, None)
    mask = module_batch.get(Columns.LOSS_MASK)
    if (
        embeddings is None
        or mask is None
        or not bool(mask.any())
        or not isinstance(module, ActorCriticModule)
        or embeddings.shape[-1] != module.embedding_dim
    ):
        return module.compute_values(module_batch)  # no embeddings, or from another module
    values = module.compute_values(module_batch, embeddings=embeddings)
    last_steps = np.cumsum(episode_lens) - 1  # each episode's bootstrap step, in the flat layout
    if module.is_stateful():  # chunks, each episode's own
        chunk_rows, chunk_columns, _ = _chunk_positions(episode_lens, module.model_config["max_seq_len"])
        rows, columns = chunk_rows[last_steps], torch.as_tensor(chunk_columns[last_steps])
        inputs = [Columns.OBS, Columns.STATE_IN, Columns.SEQ_LENS]
    else:
        rows, columns = last_steps, None
        inputs = [Columns.OBS]
    check_row = int(mask.reshape(len(mask), -1).any(dim=1).nonzero()[0, 0])
    encoded_rows = np.unique(np.append(rows, check_row))
    encoded = module.compute_values(
        select_rows({key: module_batch[key] for key in inputs if key in module_batch}, torch.as_tensor(encoded_rows))
    )
    # Step-by-step and chunked attention add in different orders (~1e-6 relative); the weights
    # of one SGD step earlier differ by far more.
    checked = mask[check_row]
    sampled, again = values[check_row][checked], encoded[int(np.searchsorted(encoded_rows, check_row))][checked]
    if not torch.allclose(sampled, again, rtol=1e-4, atol=1e-4):
        warnings.warn(
            "GAE: the critic's embeddings from sampling do not match this Learner's weights (EnvRunners "
            "not synced since the last update?); encoding the whole batch for its values instead, which "
            "is correct but slower.",
            RuntimeWarning,
        )
        return module.compute_values(module_batch)
    positions = torch.as_tensor(np.searchsorted(encoded_rows, rows))
    rows = torch.as_tensor(rows)
    if columns is None:
        values[rows] = encoded[positions]
    else:
        values[rows, columns] = encoded[positions, columns]
    return values


class BatchedGeneralAdvantageEstimation(GeneralAdvantageEstimation):
    """RLlib's GeneralAdvantageEstimation (the same batch columns and numbers) with `batch_values` and `value_targets`."""

    @override(GeneralAdvantageEstimation)
    def __call__(self, *, rl_module, episodes, batch: dict[str, Any], **kwargs):
        single_agent_episodes = list(self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
        results, device = {}, None
        for module_id, module_batch in batch.items():
            module = rl_module[module_id]
            if not isinstance(module, ValueFunctionAPI):
                continue
            lens = [len(episode) for episode in single_agent_episodes if episode.module_id in (None, module_id)]
            predictions = batch_values(module, module_batch, lens)
            device = predictions.device
            values = unpad_data_if_necessary(lens, convert_to_numpy(predictions))
            columns = [
                unpad_data_if_necessary(lens, convert_to_numpy(module_batch[column]))
                for column in (Columns.REWARDS, Columns.TERMINATEDS, Columns.TRUNCATEDS)
            ]
            targets = value_targets(values, *columns, episode_lens=lens, gamma=self.gamma, lambda_=self.lambda_)
            advantages = targets - values
            advantages = (advantages - advantages.mean()) / max(1e-4, advantages.std())
            if module.is_stateful():
                max_seq_len = module.model_config["max_seq_len"]
                advantages, targets = (
                    zero_padded_episode_chunks(column, lens, max_seq_len) for column in (advantages, targets)
                )
            results[module_id] = {Postprocessing.ADVANTAGES: advantages, Postprocessing.VALUE_TARGETS: targets}
        if self._numpy_to_tensor_connector is None:
            self._numpy_to_tensor_connector = NumpyToTensor(as_learner_connector=True, device=device)
        for module_id, tensors in self._numpy_to_tensor_connector(
            rl_module=rl_module, batch=results, episodes=episodes
        ).items():
            batch[module_id].update(tensors)
        return batch


def use_batched_advantages(learner_pipeline: ConnectorPipelineV2) -> None:
    """Replaces RLlib's GeneralAdvantageEstimation in a Learner connector pipeline by the batched one, in place."""
    for index, piece in enumerate(learner_pipeline.connectors):
        if type(piece) is GeneralAdvantageEstimation:
            replacement = BatchedGeneralAdvantageEstimation(
                piece.input_observation_space, piece.input_action_space, gamma=piece.gamma, lambda_=piece.lambda_
            )
            learner_pipeline.connectors[index] = replacement
