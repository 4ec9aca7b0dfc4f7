"""PPG: the public API, the detach design, auxiliary-phase mechanics, checkpoint state and validation.

Fast: Learners come from `config.build_learner`, data from an in-process EnvRunner.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import PPGConfig, PPGTorchLearner
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.ppg import PPGAuxiliaryValueHead, PPGMLPModel
from rl.learners.ppg.learner import AUX_OPTIMIZER_STATE, BUFFERED_COLUMNS


class PPGTransformer(PPGAuxiliaryValueHead, TransformerModel):
    pass


TRANSFORMER_CONFIG = {
    "d_model": 16,
    "n_heads": 2,
    "n_layers": 1,
    "feedforward_dim": 32,
    "memory_len": 8,
    "max_seq_len": 8,
}
# The settings under test; a buffered batch smaller than aux_minibatch_size is one minibatch.
ISSUE_SETTINGS = {
    "aux_epochs": 6,
    "aux_minibatch_size": 8192,
    "aux_lr": 3e-4,
    "beta_clone": 1.0,
    "aux_value_loss_coeff": 0.01,
    "aux_true_value_loss_coeff": 0.01,
}
# KL(pi_frozen || pi) bound over one auxiliary phase with beta_clone = 1 (measured: about 1e-6 to 1e-4).
AUX_KL_BOUND = 0.01


def ppg_config(module_class=PPGMLPModel, model_config=None, **training):
    settings = {
        "policy_iterations_per_aux": 2,
        "aux_epochs": 4,
        "aux_minibatch_size": 64,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 64,
        "num_epochs": 1,
        **training,
    }
    return (
        PPGConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config or {}))
        .training(**settings)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
        .debugging(seed=0)
    )


def train(config, iterations, learner=None):
    """Runs `iterations` PPG updates; returns the Learner and the result of each update."""
    learner = learner or config.build_learner(env=gym.make("CartPole-v1"))
    runner = SingleAgentEnvRunner(config=config)
    results = []
    for _ in range(iterations):
        episodes = runner.sample(num_timesteps=config.train_batch_size_per_learner, random_actions=False)
        results.append(
            learner.update(episodes=episodes, num_epochs=config.num_epochs, minibatch_size=config.minibatch_size)
        )
    return learner, results


def peek(results, key, module_id=DEFAULT_MODULE_ID):
    return float(results[module_id][key].peek())


def test_default_config_builds_the_detach_mlp_with_a_shared_encoder():
    config = PPGConfig().environment("CartPole-v1")
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    assert isinstance(learner, PPGTorchLearner)
    assert type(module) is PPGMLPModel
    assert module.module_config.vf_share_layers
    assert not hasattr(module, "critic_encoder")
    assert "aux_vf" in module.get_non_inference_attributes()


@pytest.mark.parametrize(
    "module_class, model_config, minibatch_size",
    [(PPGMLPModel, {}, 64), (PPGTransformer, TRANSFORMER_CONFIG, 64)],
)
def test_issue_api_runs_an_auxiliary_phase_with_both_models(module_class, model_config, minibatch_size):
    config = ppg_config(
        module_class, model_config, policy_iterations_per_aux=1, minibatch_size=minibatch_size, **ISSUE_SETTINGS
    )
    _, (result,) = train(config, 1)
    assert peek(result, "ppg/aux_phase_triggered", ALL_MODULES) == 1.0
    for name in ("aux_kl", "aux_kl_max", "aux_value_loss", "aux_true_value_loss", "aux_value_loss_first_epoch"):
        assert np.isfinite(peek(result, f"ppg/{name}"))
    # One minibatch per buffered batch and epoch.
    assert peek(result, "ppg/aux_minibatches") == ISSUE_SETTINGS["aux_epochs"]


def test_value_loss_reaches_the_value_head_but_not_the_encoder():
    config = ppg_config()
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    obs = torch.randn(32, 4)
    embeddings = module.forward_train({Columns.OBS: obs})[Columns.EMBEDDINGS]
    (module.values_from_embeddings(embeddings) ** 2).mean().backward()
    assert all(parameter.grad is None for parameter in module.encoder.parameters())
    assert all(parameter.grad.abs().sum() > 0 for parameter in module.vf.parameters())
    module.zero_grad(set_to_none=True)
    embeddings = module.forward_train({Columns.OBS: obs})[Columns.EMBEDDINGS]
    (module.aux_values_from_embeddings(embeddings) ** 2).mean().backward()
    assert all(parameter.grad.abs().sum() > 0 for parameter in module.encoder.parameters())


def test_ppo_update_gives_the_encoder_no_value_gradient():
    """With the policy and entropy terms off, a whole PPO update leaves the encoder unchanged."""
    config = ppg_config(policy_iterations_per_aux=100, vf_loss_coeff=1.0, entropy_coeff=0.0)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    module.pi.weight.data.zero_()  # zero policy-head weights: no policy gradient reaches the encoder
    module.pi.weight.requires_grad_(False)
    encoder_before = [parameter.clone() for parameter in module.encoder.parameters()]
    value_before = [parameter.clone() for parameter in module.vf.parameters()]
    train(config, 1, learner)
    assert all(torch.equal(before, after) for before, after in zip(encoder_before, module.encoder.parameters()))
    assert not all(torch.equal(before, after) for before, after in zip(value_before, module.vf.parameters()))


def test_auxiliary_phase_lowers_the_aux_value_loss_keeps_kl_small_and_clears_the_buffer():
    config = ppg_config(policy_iterations_per_aux=2, aux_epochs=6, aux_lr=1e-3)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    optimizer_ids = {id(optimizer) for optimizer in learner._named_optimizers.values()}
    assert id(learner._aux_optimizers[DEFAULT_MODULE_ID]) not in optimizer_ids

    sequence_before = learner._weights_seq_no
    _, (first,) = train(config, 1, learner)
    assert peek(first, "ppg/aux_phase_triggered", ALL_MODULES) == 0.0
    assert "ppg/aux_kl" not in first[DEFAULT_MODULE_ID]
    assert learner._aux_optimizers[DEFAULT_MODULE_ID].state == {}  # never stepped in a policy phase
    assert learner._weights_seq_no == sequence_before + 1
    assert len(learner.aux_buffer.batches) == 1
    buffered = learner.aux_buffer.batches[0][DEFAULT_MODULE_ID]
    assert set(buffered) <= set(BUFFERED_COLUMNS) and Columns.VALUE_TARGETS in buffered
    assert all(tensor.device.type == "cpu" for tensor in buffered.values())

    _, (second,) = train(config, 1, learner)
    assert peek(second, "ppg/aux_phase_triggered", ALL_MODULES) == 1.0
    assert peek(second, "ppg/iterations_since_aux", ALL_MODULES) == 2
    assert peek(second, "ppg/buffered_env_steps", ALL_MODULES) >= 2 * config.train_batch_size_per_learner
    assert peek(second, "ppg/aux_value_loss") < 0.9 * peek(second, "ppg/aux_value_loss_first_epoch")
    assert peek(second, "ppg/aux_kl_max") < AUX_KL_BOUND
    assert learner.aux_buffer.batches == [] and learner.aux_buffer.nbytes == 0
    assert learner.iterations_since_aux == 0
    # +1 for the update, +1 for the auxiliary phase's weight change.
    assert learner._weights_seq_no == sequence_before + 3
    assert learner._aux_optimizers[DEFAULT_MODULE_ID].state != {}


def test_checkpoint_state_carries_the_aux_optimizer_and_resume_restarts_the_cycle():
    config = ppg_config(policy_iterations_per_aux=1)
    learner, _ = train(config, 1)
    # The first phase ran and stepped the aux optimizer; now buffer one batch without a phase.
    learner.config.policy_iterations_per_aux = 5
    train(config, 1, learner)
    assert len(learner.aux_buffer.batches) == 1 and learner.iterations_since_aux == 1
    state = learner.get_state()
    saved = state[AUX_OPTIMIZER_STATE][DEFAULT_MODULE_ID]
    assert saved["state"], "the aux optimizer state was stepped and must be saved"

    restored = ppg_config(policy_iterations_per_aux=5).build_learner(env=gym.make("CartPole-v1"))
    restored.set_state(state)
    assert restored.aux_buffer.batches == [] and restored.iterations_since_aux == 0
    loaded = restored._aux_optimizers[DEFAULT_MODULE_ID].state_dict()["state"]
    for index, values in saved["state"].items():
        np.testing.assert_allclose(loaded[index]["exp_avg"].cpu().numpy(), values["exp_avg"])
    # A module-only state (weight sync) keeps the cycle.
    learner.set_state(learner.get_state(components="rl_module"))
    assert learner.iterations_since_aux == 1


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"num_learners": 2}, "DDP"),
        ({"use_critic": False}, "use_critic=True"),
        ({"policy_iterations_per_aux": 0}, "policy_iterations_per_aux must be a positive int"),
        ({"aux_epochs": 1.5}, "aux_epochs must be a positive int"),
        ({"aux_minibatch_size": True}, "aux_minibatch_size must be a positive int"),
        ({"aux_value_loss_coeff": -0.1}, "aux_value_loss_coeff must be a finite number >= 0.0"),
        ({"beta_clone": float("nan")}, "beta_clone must be a finite number"),
        ({"beta_clone": 0.0}, "beta_clone must be > 0 while an auxiliary value loss is on"),
        ({"aux_lr": 0.0}, "aux_lr must be a finite number > 0.0"),
    ],
)
def test_bad_settings_raise_naming_the_setting(settings, message):
    config = PPGConfig().environment("CartPole-v1")
    learners = {key: settings.pop(key) for key in ["num_learners"] if key in settings}
    config.training(**settings).learners(**learners)
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_beta_clone_may_be_zero_when_the_value_losses_are_off():
    PPGConfig().environment("CartPole-v1").training(
        beta_clone=0.0, aux_value_loss_coeff=0.0, aux_true_value_loss_coeff=0.0
    ).validate()


def test_old_api_stack_is_rejected():
    config = (
        PPGConfig()
        .environment("CartPole-v1")
        .api_stack(enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False)
    )
    with pytest.raises(ValueError, match="new API stack"):
        config.validate()


def test_modules_without_the_ppg_heads_or_with_two_encoders_are_rejected():
    with pytest.raises(TypeError, match="PPGAuxiliaryValueHead"):
        ppg_config(MLPModel).build_learner(env=gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="vf_share_layers"):
        ppg_config(PPGMLPModel, {"vf_share_layers": False}).build_learner(env=gym.make("CartPole-v1"))
