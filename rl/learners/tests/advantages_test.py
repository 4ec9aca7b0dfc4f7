"""Batched GAE: RLlib's value targets bit for bit, and the same Learner batch as RLlib's connector piece;
values from the critic's embeddings of sampling equal the value pass's."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets
from ray.rllib.utils.postprocessing.zero_padding import split_and_zero_pad_n_episodes

from rl.learners.advantages import (
    BatchedGeneralAdvantageEstimation,
    use_batched_advantages,
    value_targets,
    zero_padded_episode_chunks,
)
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.models.base import CRITIC_EMBEDDINGS
from rl.learners.ppo.learner import ActorCriticPPOTorchLearner


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
    targets = value_targets(
        np.zeros(6, np.float32), rewards, terminateds, truncateds, episode_lens=[3, 3], gamma=1.0, lambda_=1.0
    )
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


SMALL_TRANSFORMER = {
    "d_model": 16,
    "n_heads": 2,
    "n_layers": 2,
    "feedforward_dim": 32,
    "memory_len": 5,
    "max_seq_len": 8,
}
SAMPLERS = {
    "transformer": (TransformerModel, {**SMALL_TRANSFORMER, "vf_share_layers": True}, {}),
    # 16-step episodes: each bootstrap step opens an 8-step chunk of its own, as in the main job.
    "transformer_whole_chunks": (
        TransformerModel,
        {**SMALL_TRANSFORMER, "vf_share_layers": True},
        {"max_episode_steps": 16},
    ),
    "separate_transformer_critic": (TransformerModel, {**SMALL_TRANSFORMER, "vf_share_layers": False}, {}),
    "mlp": (MLPModel, {"hidden_sizes": [16], "vf_share_layers": True}, {}),
}


def learner_and_episodes(sampler: str, *, synced: bool):
    """A Learner and episodes (continuations included) sampled with its weights, or with another module's."""
    module_class, model_config, env_config = SAMPLERS[sampler]
    config = (
        PPOConfig()
        .environment("CartPole-v1", env_config=env_config)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .learners(learner_class=ActorCriticPPOTorchLearner)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    )
    torch.manual_seed(0)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    runner = SingleAgentEnvRunner(config=config)
    if synced:  # as the Algorithm syncs its EnvRunners after every update
        runner.module.set_state(learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True))
    runner.sample(num_timesteps=60, random_actions=False)
    return learner, runner.sample(num_timesteps=150, random_actions=False)


def learner_batch(learner, episodes, *, embeddings: bool):
    """The Learner connector's batch, and the (chunk or step) rows its critic encoder read."""
    episodes = copy.deepcopy(episodes)
    if not embeddings:
        for episode in episodes:
            episode.extra_model_outputs.pop(CRITIC_EMBEDDINGS, None)
    module = learner.module[DEFAULT_MODULE_ID]
    encoder = getattr(module, module.critic_encoder_name)
    rows, forward = [], encoder.forward
    encoder.forward = lambda obs, *args, **kwargs: rows.append(len(obs)) or forward(obs, *args, **kwargs)
    with torch.no_grad():
        batch = learner._learner_connector(rl_module=learner.module, batch={}, episodes=episodes, shared_data={})
    encoder.forward = forward
    return batch[DEFAULT_MODULE_ID], sum(rows)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_values_from_sampled_embeddings_equal_the_value_pass_and_encode_only_bootstrap_chunks(sampler):
    learner, episodes = learner_and_episodes(sampler, synced=True)
    assert all(CRITIC_EMBEDDINGS in episode.extra_model_outputs for episode in episodes)
    from_embeddings, rows_read = learner_batch(learner, episodes, embeddings=True)
    from_value_pass, all_rows = learner_batch(learner, episodes, embeddings=False)
    assert CRITIC_EMBEDDINGS not in from_embeddings
    for column in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS):
        torch.testing.assert_close(from_embeddings[column], from_value_pass[column], rtol=1e-5, atol=1e-5)
    # The value pass reads every row; with embeddings, one row per episode (its bootstrap step's) and the check row.
    assert all_rows == len(from_value_pass[Columns.OBS])
    assert rows_read <= len(episodes) + 1 < all_rows


def test_embeddings_sampled_with_other_weights_give_the_value_pass_exactly():
    learner, episodes = learner_and_episodes("transformer", synced=False)
    with pytest.warns(RuntimeWarning, match="do not match this Learner's weights"):
        from_embeddings, rows_read = learner_batch(learner, episodes, embeddings=True)
    from_value_pass, all_rows = learner_batch(learner, episodes, embeddings=False)
    for column in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS):
        assert torch.equal(from_embeddings[column], from_value_pass[column]), column
    assert rows_read > all_rows  # the check's rows, then the whole batch
