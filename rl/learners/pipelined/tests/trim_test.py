"""What a pipelined EnvRunner drops before its batch crosses to the Learner: the Learner's batch stays the same.

TokenTransitionEnv's infos hold two keys, "state" and "token"; PPO's batch reads neither, each
auxiliary prediction term reads one. Without Ray: an in-process EnvRunner samples, the episodes
are trimmed as a remote runner trims them, and the Learner connector builds the batch.
"""

import copy

import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import (
    ActorCriticPPOTorchLearner,
    IQNPPOTorchLearner,
    NextTokenAuxLoss,
    NextTokenAuxPPOLearner,
    StateAuxPPOLearner,
)
from rl.learners.pipelined import learner_info_keys, trim_for_learner
from rl.learners.tests.aux_models import AuxTransformer, BothAuxPPOLearner
from rl.learners.tests.token_env import TokenTransitionEnv


class NextTokenOnPlainPPOLearner(NextTokenAuxLoss, PPOTorchLearner):
    """A prediction term on a Learner that names no info keys of its own."""


MODEL_CONFIG = {
    "d_model": 16,
    "n_heads": 2,
    "n_layers": 1,
    "feedforward_dim": 32,
    "memory_len": 4,
    "max_seq_len": 8,
    "vf_share_layers": True,
    "next_token_aux": {"num_tokens": 3},
    "state_aux": {"num_states": 3},
}
COEFFICIENTS = {
    ActorCriticPPOTorchLearner: {},
    NextTokenAuxPPOLearner: {"next_token_aux/loss_coefficient": 0.5},
    StateAuxPPOLearner: {"state_aux/loss_coefficient": 0.5},
    BothAuxPPOLearner: {"next_token_aux/loss_coefficient": 0.5, "state_aux/loss_coefficient": 0.5},
}


def _config(learner_class):
    return (
        PPOConfig()
        .environment(TokenTransitionEnv, env_config={"episode_length": 20})
        .rl_module(rl_module_spec=RLModuleSpec(module_class=AuxTransformer, model_config=MODEL_CONFIG))
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .learners(learner_class=learner_class, learner_config_dict=COEFFICIENTS.get(learner_class, {}))
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    )


@pytest.mark.parametrize(
    "learner_class, keys",
    [
        (ActorCriticPPOTorchLearner, set()),
        (IQNPPOTorchLearner, set()),
        (NextTokenAuxPPOLearner, {"token"}),
        (StateAuxPPOLearner, {"state"}),
        (BothAuxPPOLearner, {"token", "state"}),
        (PPOTorchLearner, None),  # RLlib's: it names none, so every key is kept
        (NextTokenOnPlainPPOLearner, None),
    ],
)
def test_each_learner_names_the_info_keys_its_batch_reads(learner_class, keys):
    read = learner_info_keys(_config(learner_class))
    assert read == (None if keys is None else frozenset(keys))


@pytest.mark.parametrize("learner_class", [ActorCriticPPOTorchLearner, NextTokenAuxPPOLearner, BothAuxPPOLearner])
def test_trimmed_infos_give_the_same_learner_batch(learner_class):
    config = _config(learner_class)
    learner = config.build_learner(env=TokenTransitionEnv(config.env_config))
    runner = SingleAgentEnvRunner(config=config)
    runner.sample(num_timesteps=30, random_actions=False)
    episodes = runner.sample(num_timesteps=64, random_actions=False)
    assert any(episode.t_started > 0 for episode in episodes), "the batch must hold continuation chunks"
    kept, trimmed = copy.deepcopy(episodes), copy.deepcopy(episodes)
    trim_for_learner(learner.module, kept, info_keys=None)
    keys = learner_info_keys(config)
    trim_for_learner(learner.module, trimmed, info_keys=keys)

    for episode, before in zip(trimmed, kept):
        infos = episode.infos.data  # the look-back's too
        assert len(infos) == len(before.infos.data)
        assert all(set(info) <= keys for info in infos)
        assert all(
            info == {key: value for key, value in old.items() if key in keys}
            for info, old in zip(infos, before.infos.data)
        )
    dropped = any(set(info) - keys for episode in kept for info in episode.infos.data)
    assert dropped == (keys != {"state", "token"})

    expected, got = _batch(learner, kept), _batch(learner, trimmed)
    assert expected.keys() == got.keys()
    for column in expected:
        torch.testing.assert_close(got[column], expected[column], rtol=0, atol=0, msg=column)


def _batch(learner, episodes):
    batch = learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={}, metrics=learner.metrics
    )
    return {key: value for key, value in batch[DEFAULT_MODULE_ID].items() if isinstance(value, torch.Tensor)}


def test_no_keys_keep_every_info_whole():
    config = _config(ActorCriticPPOTorchLearner)
    episodes = SingleAgentEnvRunner(config=config).sample(num_timesteps=8)
    before = copy.deepcopy([episode.infos.data for episode in episodes])
    trim_for_learner(config.build_learner(env=TokenTransitionEnv(config.env_config)).module, episodes, info_keys=None)
    assert [episode.infos.data for episode in episodes] == before
    assert all({"state", "token"} <= set(info) for infos in before for info in infos[1:])
