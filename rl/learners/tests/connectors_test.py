"""Fast chunking pieces: exactly RLlib's learner batch, built faster; the Learner installs them."""

import copy
import operator
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.connectors.common.add_states_from_episodes_to_batch import AddStatesFromEpisodesToBatch
from ray.rllib.connectors.learner.add_one_ts_to_episodes_and_truncate import AddOneTsToEpisodesAndTruncate
from ray.rllib.connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.postprocessing.zero_padding import split_and_zero_pad
from ray.rllib.utils.spaces.space_utils import BatchedNdArray

from rl.learners import ActorCriticPPOTorchLearner
from rl.learners.advantages import use_batched_advantages
from rl.learners.connectors import (
    CHUNK_START_STATES,
    AddBootstrapStep,
    AddChunkStartStates,
    AddInfoColumn,
    ZeroPadToChunks,
    insert_before_chunking,
    keep_chunk_start_states,
    use_fast_chunking,
    zero_padded_chunks,
)
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.models.base import CRITIC_EMBEDDINGS
from rl.learners.tests.nests import assert_same_nest, leaves

# The samplers here are not synced with the Learners, so GAE encodes the whole batch, as RLlib's does
# (the batches are compared bit for bit), and warns that the sampled critic embeddings went unused.
pytestmark = pytest.mark.filterwarnings("ignore:GAE. the critic's embeddings:RuntimeWarning")

SMALL = {"d_model": 16, "n_heads": 2, "n_layers": 2, "feedforward_dim": 32, "memory_len": 5, "max_seq_len": 8}


def transformer_config():
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(
            rl_module_spec=RLModuleSpec(module_class=TransformerModel, model_config={**SMALL, "vf_share_layers": True})
        )
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .learners(learner_class=ActorCriticPPOTorchLearner)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    )


@pytest.mark.parametrize(
    "items",
    [
        [BatchedNdArray(np.arange(20, dtype=np.float32).reshape(10, 2))],  # 10 steps: one padded chunk of 2
        [BatchedNdArray(np.arange(8)), BatchedNdArray(np.arange(3))],
        [True, False, True],  # single steps, as RLlib adds the loss mask and terminateds
        [1.5, 2.5],
        [np.float32(1.0)] * 8,  # exactly two chunks: no padding
        [{"a": np.ones(2), "b": 3}] * 5,  # nested: RLlib's own function
    ],
)
def test_zero_padded_chunks_equal_rllibs_split_and_zero_pad(items):
    assert_same_nest(split_and_zero_pad(copy.deepcopy(items), 4), zero_padded_chunks(copy.deepcopy(items), 4))


def sampled_episodes(config, num_timesteps=150):
    """Episodes with per-step STATE_OUTs, including continuations of episodes cut by an earlier sample."""
    runner = SingleAgentEnvRunner(config=config)
    runner.sample(num_timesteps=60, random_actions=False)
    return runner.sample(num_timesteps=num_timesteps, random_actions=False)


@pytest.mark.parametrize("episode_source", ["transformer", "stateless"])
def test_fast_chunking_and_batched_advantages_build_exactly_rllibs_learner_batch(episode_source):
    config = transformer_config()
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    # A stateless sampler leaves no STATE_OUTs: RLlib then trains from the initial state.
    sampler_config = (
        config
        if episode_source == "transformer"
        else transformer_config().rl_module(rl_module_spec=RLModuleSpec(module_class=MLPModel))
    )
    episodes = sampled_episodes(sampler_config)
    batches = []
    for fast in (False, True):
        pipeline = config.build_learner_connector(input_observation_space=None, input_action_space=None)
        pipeline.append(GeneralAdvantageEstimation(gamma=config.gamma, lambda_=config.lambda_))  # as PPO's Learner
        if fast:
            use_fast_chunking(pipeline)
            use_batched_advantages(pipeline)
        with torch.no_grad():
            batch = pipeline(rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={})
        batches.append(batch[DEFAULT_MODULE_ID])
    # The harness's GAE reads the critic's embeddings from sampling (here from another module's weights:
    # it encodes the batch as RLlib does) and drops them; RLlib's leaves them. The MLP's critic does not run while sampling.
    assert (CRITIC_EMBEDDINGS in batches[0]) == (episode_source == "transformer") and CRITIC_EMBEDDINGS not in batches[
        1
    ]
    batches[0].pop(CRITIC_EMBEDDINGS, None)
    assert batches[0][Columns.OBS].shape[1] == SMALL["max_seq_len"] and batches[0][Columns.STATE_IN]
    assert Postprocessing.ADVANTAGES in batches[0]
    assert_same_nest(*batches)


def state_arrays(episode):
    return [leaf for _, leaf in leaves(episode.extra_model_outputs[Columns.STATE_OUT].data)]


def test_the_bootstrap_step_leaves_numpy_states_uncopied_and_chunk_states_equal_rllibs():
    config = transformer_config().environment("CartPole-v1", env_config={"max_episode_steps": SMALL["max_seq_len"]})
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    episodes = sampled_episodes(config, num_timesteps=80)
    lengths = [len(episode) for episode in episodes]
    assert all(episode.is_numpy for episode in episodes)
    assert SMALL["max_seq_len"] in lengths  # a bootstrap step that opens a chunk of its own
    rllib_pieces = (AddOneTsToEpisodesAndTruncate, AddStatesFromEpisodesToBatch)
    batches, states = [], []
    for pieces in (rllib_pieces, (AddBootstrapStep, AddChunkStartStates)):
        copies = copy.deepcopy(episodes)
        before = [state_arrays(episode) for episode in copies]
        # NEXT_STATE_IN is added when the batch has next observations (e.g. off-policy losses).
        batch = {Columns.NEXT_OBS: {}}
        for piece in pieces:
            batch = piece(as_learner_connector=True)(
                rl_module=learner.module, batch=batch, episodes=copies, shared_data={}
            )
        batches.append({column: batch[column] for column in (Columns.STATE_IN, Columns.NEXT_STATE_IN)})
        states.append(
            [
                (
                    len(episode),
                    len(episode.extra_model_outputs[Columns.STATE_OUT]),
                    all(map(operator.is_, arrays, state_arrays(episode))),
                )
                for episode, arrays in zip(copies, before)
            ]
        )
    # RLlib's copies every state to append the bootstrap step's; AddBootstrapStep leaves them as they were.
    assert states[0] == [(length + 1, length + 1, False) for length in lengths]
    assert states[1] == [(length + 1, length, True) for length in lengths]
    assert_same_nest(*batches)


@pytest.mark.parametrize("max_episode_steps", [None, SMALL["max_seq_len"]])
def test_the_learner_batch_is_the_same_from_list_and_numpy_episodes(max_episode_steps):
    # A local EnvRunner feeding a local Learner hands its episodes over as lists
    # (episodes_to_numpy=False, as the harness configures it); remote ones and the batched runner's as numpy.
    config = transformer_config().env_runners(episodes_to_numpy=False)
    if max_episode_steps:  # as the main job's: each bootstrap step opens a chunk of its own
        config.environment("CartPole-v1", env_config={"max_episode_steps": max_episode_steps})
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    episodes = sampled_episodes(config)
    assert not any(episode.is_numpy for episode in episodes)
    assert not max_episode_steps or [len(episode) for episode in episodes].count(max_episode_steps) >= 2
    batches = []
    for numpy_episodes in (True, False):
        copies = copy.deepcopy(episodes)
        with torch.no_grad():
            batch = learner._learner_connector(
                rl_module=learner.module,
                batch={},
                shared_data={},
                episodes=[episode.to_numpy() for episode in copies] if numpy_episodes else copies,
            )
        batches.append(batch[DEFAULT_MODULE_ID])
    assert batches[0][Columns.STATE_IN] and Columns.ADVANTAGES in batches[0]
    assert_same_nest(*batches)


def test_chunk_start_states_fill_next_state_in_like_rllib():
    config = transformer_config()
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    episodes = sampled_episodes(config, num_timesteps=80)
    batches = []
    rllib_piece, fast_piece = AddStatesFromEpisodesToBatch, AddChunkStartStates
    for piece in (rllib_piece(as_learner_connector=True), fast_piece(as_learner_connector=True)):
        # NEXT_STATE_IN is added when the batch has next observations (e.g. off-policy losses).
        batches.append(piece(rl_module=learner.module, batch={Columns.NEXT_OBS: {}}, episodes=copy.deepcopy(episodes)))
    assert batches[0][Columns.NEXT_STATE_IN]
    assert_same_nest(*batches)


def test_the_learner_chunks_fast_and_predicts_values_without_autograd():
    learner = transformer_config().build_learner(env=gym.make("CartPole-v1"))
    pieces = [type(piece) for piece in learner._learner_connector.connectors]
    assert ZeroPadToChunks in pieces and AddChunkStartStates in pieces
    module = learner.module[DEFAULT_MODULE_ID]
    grad_enabled = []
    compute_values = module.compute_values
    module.compute_values = lambda *args, **kwargs: (
        grad_enabled.append(torch.is_grad_enabled()) or compute_values(*args, **kwargs)
    )
    learner.update(episodes=sampled_episodes(transformer_config()))
    assert grad_enabled[0] is False  # GAE's value predictions in the connector
    assert True in grad_enabled  # the loss's, which need gradients


def test_info_column_goes_before_chunking_and_rejects_bad_settings():
    pipeline = transformer_config().build_learner_connector(input_observation_space=None, input_action_space=None)
    use_fast_chunking(pipeline)
    piece = AddInfoColumn(info_key="token", offset=1, column="next_tokens")
    insert_before_chunking(pipeline, piece)
    pieces = pipeline.connectors
    assert pieces.index(piece) + 1 == [type(existing) for existing in pieces].index(ZeroPadToChunks)
    with pytest.raises(ValueError, match="offset must be 0 .* or 1 .*, got 2"):
        AddInfoColumn(info_key="token", offset=2, column="next_tokens")
    pipeline.remove("ZeroPadToChunks")
    with pytest.raises(ValueError, match="has no AddTimeDimToBatchAndZeroPad to insert AddInfoColumn before"):
        insert_before_chunking(pipeline, piece)


def test_episodes_keeping_only_chunk_start_states_give_rllibs_learner_states():
    # Episodes of max_seq_len steps (each bootstrap step opens a chunk of its own) and continuations.
    config = transformer_config().environment("CartPole-v1", env_config={"max_episode_steps": SMALL["max_seq_len"]})
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    episodes = sampled_episodes(transformer_config(), num_timesteps=80) + sampled_episodes(config, num_timesteps=80)
    assert any(episode.t_started > 0 for episode in episodes)
    assert SMALL["max_seq_len"] in [len(episode) for episode in episodes]
    kept = copy.deepcopy(episodes)
    keep_chunk_start_states(learner.module, kept)
    assert all(Columns.STATE_OUT not in episode.extra_model_outputs for episode in kept)
    assert len(pickle.dumps(kept)) < len(pickle.dumps(episodes)) / 3
    batches = []
    for pieces, source in (
        ((AddOneTsToEpisodesAndTruncate, AddStatesFromEpisodesToBatch), episodes),
        ((AddBootstrapStep, AddChunkStartStates), pickle.loads(pickle.dumps(kept))),
    ):
        batch = {}
        for piece in pieces:
            batch = piece(as_learner_connector=True)(
                rl_module=learner.module, batch=batch, episodes=copy.deepcopy(source), shared_data={}
            )
        batches.append(batch[Columns.STATE_IN])
    assert_same_nest(*batches)


def test_kept_chunk_start_states_refuse_another_chunk_length_and_next_states():
    config = transformer_config()
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    episodes = sampled_episodes(config, num_timesteps=40)
    keep_chunk_start_states(learner.module, episodes)
    piece = AddChunkStartStates(as_learner_connector=True)
    with pytest.raises(ValueError, match="reads next states"):
        piece(rl_module=learner.module, batch={Columns.NEXT_OBS: {}}, episodes=copy.deepcopy(episodes))
    for episode in episodes:
        episode.custom_data[CHUNK_START_STATES]["max_seq_len"] = 2 * SMALL["max_seq_len"]
    with pytest.raises(ValueError, match="max_seq_len 16, the Learner's module chunks by 8"):
        piece(rl_module=learner.module, batch={}, episodes=episodes)
