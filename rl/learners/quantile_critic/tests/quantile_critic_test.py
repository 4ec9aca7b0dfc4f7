"""IQN and QR critics: the public API, composition with both models, validation and masking."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import IQNPPOTorchLearner, QRPPOTorchLearner
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin
from rl.losses import midpoint_taus


class IQNTransformerModel(IQNValueMixin, TransformerModel):
    pass


class IQNMLPModel(IQNValueMixin, MLPModel):
    pass


class QRTransformerModel(QRValueMixin, TransformerModel):
    pass


class QRMLPModel(QRValueMixin, MLPModel):
    pass


IQN_MODEL_CONFIG = {"iqn_value": {"train_quantiles": 32, "value_quantiles": 64, "n_cosines": 64}}
IQN_LEARNER_CONFIG = {"iqn_value/loss_coefficient": 0.5, "iqn_value/huber_kappa": 1.0}
QR_MODEL_CONFIG = {"qr_value": {"num_quantiles": 64}}
QR_LEARNER_CONFIG = {"qr_value/loss_coefficient": 0.5, "qr_value/huber_kappa": 1.0}
CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def ppo_config(module_class, learner_class, model_config, learner_config_dict, **training):
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))
        .training(
            **{
                "vf_loss_coeff": 0.0,
                "train_batch_size_per_learner": 128,
                "minibatch_size": 64,
                "num_epochs": 1,
                **training,
            }
        )
        .learners(learner_class=learner_class, learner_config_dict=learner_config_dict)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    )


def build(config):
    return config.build_learner(env=gym.make("CartPole-v1"))


@pytest.mark.parametrize(
    "module_class, learner_class, model_config, learner_config_dict, namespace",
    [
        (IQNTransformerModel, IQNPPOTorchLearner, IQN_MODEL_CONFIG, IQN_LEARNER_CONFIG, "iqn_value"),
        (IQNMLPModel, IQNPPOTorchLearner, IQN_MODEL_CONFIG, IQN_LEARNER_CONFIG, "iqn_value"),
        (QRTransformerModel, QRPPOTorchLearner, QR_MODEL_CONFIG, QR_LEARNER_CONFIG, "qr_value"),
        (QRMLPModel, QRPPOTorchLearner, QR_MODEL_CONFIG, QR_LEARNER_CONFIG, "qr_value"),
    ],
)
def test_issue_api_composes_with_both_models_and_logs_namespaced_metrics(
    module_class, learner_class, model_config, learner_config_dict, namespace
):
    config = ppo_config(module_class, learner_class, model_config, learner_config_dict)
    learner = build(config)
    runner = SingleAgentEnvRunner(config=config)
    episodes = runner.sample(num_timesteps=128, random_actions=False)
    results = learner.update(episodes=episodes, num_epochs=1, minibatch_size=64)[DEFAULT_MODULE_ID]
    for metric in ("loss", "quantile_spread", "crossing_fraction"):
        assert np.isfinite(results[f"{namespace}/{metric}"].peek())


def module_of(module_class, model_config):
    torch.manual_seed(0)
    return module_class(observation_space=CARTPOLE_OBS, action_space=gym.spaces.Discrete(2), model_config=model_config)


@pytest.mark.parametrize("module_class, model_config", [(IQNMLPModel, IQN_MODEL_CONFIG), (QRMLPModel, QR_MODEL_CONFIG)])
def test_value_is_the_deterministic_mean_of_fixed_midpoint_quantiles(module_class, model_config):
    module = module_of(module_class, model_config)
    batch = {Columns.OBS: torch.randn(6, 4)}
    with torch.no_grad():
        values = module.compute_values(batch)
        embeddings = module.forward_train(batch)[Columns.EMBEDDINGS]
        quantiles, taus = module.value_quantiles(embeddings)
        assert torch.equal(module.compute_values(batch), values)
    assert torch.equal(taus, midpoint_taus(64))
    assert torch.allclose(values, quantiles.mean(dim=-1))
    assert "vf" in module.get_non_inference_attributes()


def test_iqn_trains_on_fresh_uniform_taus_per_step():
    module = module_of(IQNMLPModel, IQN_MODEL_CONFIG)
    embeddings = module.forward_train({Columns.OBS: torch.randn(6, 4)})[Columns.EMBEDDINGS]
    quantiles, taus = module.training_value_quantiles(embeddings)
    assert quantiles.shape == taus.shape == (6, 32)
    assert 0.0 <= taus.min() and taus.max() <= 1.0 and not torch.equal(taus[0], taus[1])


def test_loss_term_honours_the_loss_mask():
    config = ppo_config(QRMLPModel, QRPPOTorchLearner, QR_MODEL_CONFIG, QR_LEARNER_CONFIG)
    learner = build(config)
    embeddings = torch.randn(6, 64)
    targets = torch.tensor([1.0, 2.0, 3.0, float("nan"), 5.0, float("inf")])
    mask = torch.tensor([True, True, True, False, True, False])

    def term(fwd_embeddings, batch):
        loss, _ = learner.compute_loss_term(
            module_id=DEFAULT_MODULE_ID,
            config=config,
            batch=batch,
            fwd_out={Columns.EMBEDDINGS: fwd_embeddings},
            options=learner.read_loss_options(config),
        )
        return loss

    masked = term(embeddings, {Columns.VALUE_TARGETS: targets, Columns.LOSS_MASK: mask})
    valid_only = term(embeddings[mask], {Columns.VALUE_TARGETS: targets[mask]})
    assert torch.isfinite(masked) and torch.allclose(masked, valid_only)


def test_zero_coefficient_switches_the_term_off():
    config = ppo_config(QRMLPModel, QRPPOTorchLearner, QR_MODEL_CONFIG, {"qr_value/loss_coefficient": 0.0})
    learner = build(config)
    runner = SingleAgentEnvRunner(config=config)
    results = learner.update(episodes=runner.sample(num_timesteps=128, random_actions=False))[DEFAULT_MODULE_ID]
    assert not [key for key in results if key.startswith("qr_value/")]


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"vf_loss_coeff": 1.0}, ValueError, r"set config.training\(vf_loss_coeff=0.0\) \(got 1.0\)"),
        ({"use_critic": False}, ValueError, r"use_critic=True"),
        (
            {"module_class": IQNMLPModel, "model_config": IQN_MODEL_CONFIG},
            TypeError,
            r"QRPPOTorchLearner trains modules with QRValueMixin, .* IQNMLPModel",
        ),
        (
            {"module_class": MLPModel, "model_config": {}},
            TypeError,
            r"use e.g. `class Model\(QRValueMixin, MLPModel\): pass`",
        ),
        ({"learner_config_dict": {}}, ValueError, r"lacks 'qr_value/loss_coefficient'"),
        ({"learner_config_dict": {**QR_LEARNER_CONFIG, "qr_value/kappa": 1.0}}, ValueError, r"\['qr_value/kappa'\]"),
        (
            {"learner_config_dict": {**QR_LEARNER_CONFIG, "qr_value/huber_kappa": 0}},
            ValueError,
            r"qr_value/huber_kappa must be",
        ),
        (
            {"model_config": {"qr_value": {"num_quantiles": 0}}},
            ValueError,
            r"model_config\['qr_value'\]: num_quantiles",
        ),
    ],
)
def test_bad_configurations_fail_when_the_learner_is_built(change, error, message):
    arguments = {
        "module_class": QRMLPModel,
        "learner_class": QRPPOTorchLearner,
        "model_config": QR_MODEL_CONFIG,
        "learner_config_dict": QR_LEARNER_CONFIG,
    }
    training = {key: change.pop(key) for key in ("vf_loss_coeff", "use_critic") if key in change}
    arguments.update(change)
    with pytest.raises(error, match=message):
        build(ppo_config(**arguments, **training))
