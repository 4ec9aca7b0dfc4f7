"""Auxiliary prediction heads and losses: module shapes, target alignment, updates, free at zero, validation.

Fast: Learners come from `config.build_learner`, data from an in-process EnvRunner on TokenTransitionEnv,
whose targets the tests recompute from the observations and actions alone.
"""

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import NextTokenAuxPPOLearner
from rl.learners.aux_prediction import NEXT_TOKEN_TARGETS, STATE_TARGETS
from rl.learners.connectors import AddInfoColumn
from rl.learners.models import MLPModel, NextTokenAuxHead, NextTokenAuxMLPModel, StateAuxHead, TransformerModel
from rl.learners.tests.aux_models import AuxTransformer, BothAuxPPOLearner
from rl.learners.tests.token_env import TokenTransitionEnv


class AuxMLP(StateAuxHead, NextTokenAuxHead, MLPModel):  # the other order: mixins stack either way
    pass


NUM_STATES = 3
EPISODE_LENGTH = 20
SECTIONS = {
    "vf_share_layers": True,
    "next_token_aux": {"num_tokens": NUM_STATES},
    "state_aux": {"num_states": NUM_STATES},
}
TRANSFORMER = {"d_model": 16, "n_heads": 2, "n_layers": 1, "feedforward_dim": 32, "memory_len": 4, "max_seq_len": 8}
MLP = {"hidden_sizes": [16]}
MODELS = {"transformer": (AuxTransformer, {**TRANSFORMER, **SECTIONS}), "mlp": (AuxMLP, {**MLP, **SECTIONS})}
BOTH_ON = {"next_token_aux/loss_coefficient": 0.5, "state_aux/loss_coefficient": 0.5}
OBS_SPACE = gym.spaces.Box(0.0, 1.0, (NUM_STATES,), np.float32)


def aux_config(model="transformer", learner_class=BothAuxPPOLearner, learner_config_dict=None, module=None, env=None):
    module_class, model_config = module or MODELS[model]
    return (
        PPOConfig()
        .environment(env or TokenTransitionEnv, env_config={} if env else {"episode_length": EPISODE_LENGTH})
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .learners(
            learner_class=learner_class,
            learner_config_dict=BOTH_ON if learner_config_dict is None else learner_config_dict,
        )
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    )


CARTPOLE_MODULE = (NextTokenAuxMLPModel, {**MLP, "vf_share_layers": True, "next_token_aux": {"num_tokens": 3}})


def build(config):
    env = gym.make(config.env) if isinstance(config.env, str) else config.env(config.env_config)
    return config.build_learner(env=env)


def sampled_episodes(config):
    """Two envs of 20-step episodes: 30 steps, then 64 more, so the batch holds continuation chunks."""
    runner = SingleAgentEnvRunner(config=config)
    runner.sample(num_timesteps=30, random_actions=False)
    return runner.sample(num_timesteps=64, random_actions=False)


def learner_batch(learner, episodes):
    batch = learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={}, metrics=learner.metrics
    )
    return {key: value for key, value in batch[DEFAULT_MODULE_ID].items() if key != Columns.STATE_IN}


def module(model="transformer", **model_config):
    module_class, default_config = MODELS[model]
    return module_class(
        observation_space=OBS_SPACE,
        action_space=gym.spaces.Discrete(2),
        model_config={**default_config, **model_config},
    )


@pytest.mark.parametrize("model, obs_shape", [("transformer", (4, 8)), ("mlp", (4,))])
def test_heads_read_the_embedding_and_the_action_and_train_the_encoder(model, obs_shape):
    aux = module(model)
    embeddings = aux.forward_train({Columns.OBS: torch.rand(*obs_shape, NUM_STATES)})[Columns.EMBEDDINGS]
    actions = torch.randint(2, obs_shape)
    next_token_logits = aux.next_token_logits_from_embeddings(embeddings, actions)
    state_logits = aux.state_logits_from_embeddings(embeddings)
    assert next_token_logits.shape == state_logits.shape == (*obs_shape, NUM_STATES)
    # 16 embedding features plus the one-hot of 2 actions.
    assert aux.next_token_aux_head.in_features == 16 + 2 and aux.state_aux_head.in_features == 16
    # The action changes the prediction by the head's action column: W[:, 16 + 1] - W[:, 16 + 0].
    flipped = aux.next_token_logits_from_embeddings(embeddings, 1 - actions)
    weight = aux.next_token_aux_head.weight
    sign = (1 - 2 * actions).unsqueeze(-1)  # +1 where the flipped action is 1
    torch.testing.assert_close(flipped - next_token_logits, sign * (weight[:, 17] - weight[:, 16]))
    (next_token_logits.square().sum() + state_logits.square().sum()).backward()
    assert all(parameter.grad is not None and parameter.grad.abs().sum() > 0 for parameter in aux.encoder.parameters())


def test_inference_only_module_has_no_aux_heads():
    module_class, model_config = MODELS["transformer"]
    runner_module = module_class(
        observation_space=OBS_SPACE, action_space=gym.spaces.Discrete(2), inference_only=True, model_config=model_config
    )
    assert not hasattr(runner_module, "next_token_aux_head") and not hasattr(runner_module, "state_aux_head")
    learner_module = module()
    assert {"next_token_aux_head", "state_aux_head"} <= set(learner_module.get_non_inference_attributes())
    runner_module.set_state(learner_module.get_state(inference_only=True))


@pytest.mark.parametrize(
    "model_config, action_space, message",
    [
        (
            {"next_token_aux": None},
            gym.spaces.Discrete(2),
            r"model_config\['next_token_aux'\] must be a dict with \['num_tokens'\]",
        ),
        (
            {"state_aux": {}},
            gym.spaces.Discrete(2),
            r"model_config\['state_aux'\] must be a dict with \['num_states'\]",
        ),
        ({"state_aux": {"num_states": 0}}, gym.spaces.Discrete(2), "num_states must be a positive int"),
        ({"next_token_aux": {"num_tokens": 3, "size": 2}}, gym.spaces.Discrete(2), r"unknown key\(s\) \['size'\]"),
        ({"vf_share_layers": False}, gym.spaces.Discrete(2), r"set model_config\['vf_share_layers'\] = True"),
        ({}, gym.spaces.Box(-1.0, 1.0, (2,)), "NextTokenAuxHead .* needs a Discrete action space"),
    ],
)
def test_bad_module_settings_raise_one_clear_line(model_config, action_space, message):
    model_class, default_config = MODELS["mlp"]
    with pytest.raises(ValueError, match=message) as error:
        model_class(
            observation_space=OBS_SPACE, action_space=action_space, model_config={**default_config, **model_config}
        )
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("model", ["transformer", "mlp"])
def test_targets_are_the_infos_of_the_step_aligned_with_its_action(model):
    config = aux_config(model)
    learner = build(config)
    episodes = sampled_episodes(config)
    assert any(episode.t_started > 0 for episode in episodes), "the batch must hold a continuation chunk"
    batch = learner_batch(learner, episodes)
    mask = batch[Columns.LOSS_MASK].bool()
    for column in (NEXT_TOKEN_TARGETS, STATE_TARGETS):
        assert batch[column].shape == batch[Columns.ACTIONS].shape  # (N,) flat, (B, T) chunks
    states = batch[Columns.OBS].argmax(dim=-1)
    # The env's rule (token_env.py), from observation t and action t only.
    assert torch.equal(batch[STATE_TARGETS][mask], states[mask])
    assert torch.equal(batch[NEXT_TOKEN_TARGETS][mask], ((states + batch[Columns.ACTIONS]) % NUM_STATES)[mask])
    # The same as the sampled episodes' infos: info t + 1 (after action t) for tokens, info t for states.
    tokens = [episode.get_infos(t + 1)["token"] for episode in episodes for t in range(len(episode))]
    hidden_states = [episode.get_infos(t)["state"] for episode in episodes for t in range(len(episode))]
    assert batch[NEXT_TOKEN_TARGETS][mask].tolist() == tokens
    assert batch[STATE_TARGETS][mask].tolist() == hidden_states


@pytest.mark.parametrize("model", ["transformer", "mlp"])
def test_an_update_trains_both_heads_and_logs_namespaced_metrics(model):
    config = aux_config(model)
    learner = build(config)
    aux = learner.module[DEFAULT_MODULE_ID].unwrapped()
    heads_before = [
        parameter.clone() for head in (aux.next_token_aux_head, aux.state_aux_head) for parameter in head.parameters()
    ]
    results = learner.update(episodes=sampled_episodes(config))[DEFAULT_MODULE_ID]
    heads_after = [
        parameter for head in (aux.next_token_aux_head, aux.state_aux_head) for parameter in head.parameters()
    ]
    assert not any(torch.equal(before, after) for before, after in zip(heads_before, heads_after))
    for namespace in ("next_token_aux", "state_aux"):
        # Near-uniform initial predictions (head gain 0.01): cross-entropy about log 3.
        assert results[f"{namespace}/loss"].peek() == pytest.approx(math.log(NUM_STATES), abs=0.05)
        assert 0.0 <= results[f"{namespace}/accuracy"].peek() <= 1.0


def test_zero_coefficient_computes_logs_and_reads_nothing():
    # CartPole has no infos: at coefficient 0 the target column is never built, so nothing fails.
    config = aux_config(
        learner_class=NextTokenAuxPPOLearner,
        learner_config_dict={"next_token_aux/loss_coefficient": 0.0},
        module=CARTPOLE_MODULE,
        env="CartPole-v1",
    )
    learner = build(config)
    assert not any(isinstance(piece, AddInfoColumn) for piece in learner._learner_connector.connectors)
    head_before = [
        parameter.clone() for parameter in learner.module[DEFAULT_MODULE_ID].next_token_aux_head.parameters()
    ]
    results = learner.update(episodes=sampled_episodes(config))[DEFAULT_MODULE_ID]
    assert not any(key.startswith("next_token_aux/") for key in results)
    head_after = learner.module[DEFAULT_MODULE_ID].next_token_aux_head.parameters()
    assert all(torch.equal(before, after) for before, after in zip(head_before, head_after))


def test_an_env_without_the_info_key_fails_naming_key_and_env():
    config = aux_config(
        learner_class=NextTokenAuxPPOLearner,
        learner_config_dict={"next_token_aux/loss_coefficient": 0.5},
        module=CARTPOLE_MODULE,
        env="CartPole-v1",
    )
    learner = build(config)
    with pytest.raises(
        ValueError, match=r"needs info\['token'\] at every step, but env 'CartPole-v1' returned"
    ) as error:
        learner.update(episodes=sampled_episodes(config))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "module, learner_config_dict, error, message",
    [
        (
            (TransformerModel, {**TRANSFORMER, "vf_share_layers": True}),
            BOTH_ON,
            TypeError,
            (
                r"'next_token_aux' term needs modules with NextTokenAuxHead, but module 'default_policy' is TransformerModel; "
                r"use e.g. `class Model\(NextTokenAuxHead, TransformerModel\): pass`"
            ),
        ),
        (
            None,
            {**BOTH_ON, "state_aux/loss_coeficient": 0.5},
            ValueError,
            r"unknown key\(s\) \['state_aux/loss_coeficient'\]",
        ),
        (None, {"state_aux/loss_coefficient": 0.5}, ValueError, "lacks 'next_token_aux/loss_coefficient'"),
        (
            None,
            {**BOTH_ON, "state_aux/loss_coefficient": -1.0},
            ValueError,
            "state_aux/loss_coefficient must be a finite number >= 0",
        ),
    ],
)
def test_bad_learner_settings_fail_when_built_with_one_clear_line(module, learner_config_dict, error, message):
    with pytest.raises(error, match=message) as raised:
        build(aux_config(learner_config_dict=learner_config_dict, module=module))
    assert "\n" not in str(raised.value)
