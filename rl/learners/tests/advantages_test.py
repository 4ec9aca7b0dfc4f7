"""Batched GAE: RLlib's value targets bit for bit, and the same Learner batch as RLlib's connector piece."""

import numpy as np
import pytest

from ray.rllib.connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets
from ray.rllib.utils.postprocessing.zero_padding import split_and_zero_pad_n_episodes

from rl.learners.advantages import (
    BatchedGeneralAdvantageEstimation,
    use_batched_advantages,
    value_targets,
    zero_padded_episode_chunks,
)


def random_episodes(generator: np.random.Generator, lens: list[int], flags=np.float32):
    """Flat columns laid out as AddOneTsToEpisodesAndTruncate leaves them: each episode's last real step
    terminated or truncated, then its bootstrap step with neither flag (RLlib's recursion carries the next
    episode's first advantage into it); plus a few flags inside episodes."""
    total = sum(lens)
    values = generator.normal(size=total).astype(np.float32)
    rewards = generator.normal(size=total).astype(np.float32)
    terminateds = np.zeros(total, dtype=np.float32)
    truncateds = np.zeros(total, dtype=np.float32)
    last_real = (np.cumsum(lens) - 2)[np.asarray(lens) > 1]
    ended = generator.random(len(last_real)) < 0.5
    terminateds[last_real[ended]] = 1.0
    truncateds[last_real[~ended]] = 1.0
    inside = generator.choice(total, size=max(1, total // 20), replace=False)
    terminateds[inside] = 1.0
    return values, rewards, terminateds.astype(flags), truncateds.astype(flags)


@pytest.mark.parametrize("flags", [np.float32, bool])  # the batch's flag columns come as either
@pytest.mark.parametrize("seed", range(5))
def test_value_targets_equal_rllibs_bit_for_bit(seed, flags):
    generator = np.random.default_rng(seed)
    lens = list(generator.integers(1, 80, size=generator.integers(1, 40)))
    values, rewards, terminateds, truncateds = random_episodes(generator, lens, flags)
    expected = compute_value_targets(values, rewards, terminateds, truncateds, gamma=0.99, lambda_=0.95)
    actual = value_targets(values, rewards, terminateds, truncateds, episode_lens=lens, gamma=0.99, lambda_=0.95)
    assert actual.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(actual, expected)


def test_the_recursion_stops_at_episode_ends_and_terminations():
    # Two episodes of three steps, rewards 1, gamma = lambda = 1, zero values: each target is the
    # rewards left in its episode; the first episode terminates after step 1 (its step 2 is the bootstrap).
    rewards = np.ones(6, dtype=np.float32)
    terminateds = np.array([0, 1, 0, 0, 0, 0], dtype=np.float32)
    truncateds = np.array([0, 0, 1, 0, 0, 1], dtype=np.float32)
    targets = value_targets(np.zeros(6, np.float32), rewards, terminateds, truncateds, episode_lens=[3, 3],
                            gamma=1.0, lambda_=1.0)
    np.testing.assert_array_equal(targets, [2, 1, 1, 3, 2, 1])


@pytest.mark.parametrize("lens", [[3, 2], [16, 16, 1], [64, 65, 17, 5], [1]])
def test_episode_chunks_equal_rllibs_split_and_zero_pad(lens):
    values = np.random.default_rng(len(lens)).normal(size=sum(lens)).astype(np.float32)
    expected = np.stack(split_and_zero_pad_n_episodes(values, episode_lens=lens, max_seq_len=16), axis=0)
    actual = zero_padded_episode_chunks(values, lens, 16)
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


def test_the_pipeline_piece_is_replaced_keeping_its_parameters():
    class Pipeline:
        connectors = [GeneralAdvantageEstimation(gamma=0.9, lambda_=0.8)]

    use_batched_advantages(Pipeline)
    [piece] = Pipeline.connectors
    assert type(piece) is BatchedGeneralAdvantageEstimation and (piece.gamma, piece.lambda_) == (0.9, 0.8)
