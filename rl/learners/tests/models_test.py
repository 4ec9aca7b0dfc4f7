"""Actor-critic base module and MLPModel: layout, heads, settings validation, extension points."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical, TorchDiagGaussian

from rl.learners.models import ActorCriticModule, MLPModel, TransformerModel

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(3)
CONTINUOUS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def mlp(action_space=DISCRETE, inference_only=False, **model_config):
    return MLPModel(
        observation_space=OBS_SPACE, action_space=action_space, inference_only=inference_only, model_config=model_config
    )


def test_discrete_forward_train_emits_logits_and_critic_embeddings():
    module = mlp(hidden_sizes=[16, 8])
    out = module.forward_train({Columns.OBS: torch.randn(5, 4)})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (5, 3)
    assert out[Columns.EMBEDDINGS].shape == (5, 8)
    assert module.compute_values({Columns.OBS: torch.randn(5, 4)}).shape == (5,)
    assert module.get_train_action_dist_cls() is TorchCategorical
    assert not module.is_stateful()


def test_continuous_head_emits_mean_and_log_std_for_a_diag_gaussian():
    module = mlp(CONTINUOUS)
    inputs = module.forward_exploration({Columns.OBS: torch.randn(5, 4)})[Columns.ACTION_DIST_INPUTS]
    assert inputs.shape == (5, 4)
    assert torch.equal(inputs[:, 2:], torch.zeros(5, 2))  # log-std starts at 0
    assert module.get_train_action_dist_cls() is TorchDiagGaussian


def test_separate_critic_encoder_by_default_and_shared_on_request():
    separate = mlp()
    shared = mlp(vf_share_layers=True)
    obs = torch.randn(5, 4)
    assert hasattr(separate, "critic_encoder") and not hasattr(shared, "critic_encoder")
    emb = separate.forward_train({Columns.OBS: obs})[Columns.EMBEDDINGS]
    assert torch.allclose(emb, separate.critic_encoder(obs)[0])
    assert separate.get_non_inference_attributes() == ["vf", "critic_encoder"]
    assert shared.get_non_inference_attributes() == ["vf"]


def test_inference_only_module_drops_training_heads_and_loads_learner_weights():
    learner_module = mlp()
    runner_module = mlp(inference_only=True)
    assert not hasattr(runner_module, "vf") and not hasattr(runner_module, "critic_encoder")
    runner_module.set_state(learner_module.get_state(inference_only=True))
    obs = {Columns.OBS: torch.randn(5, 4)}
    assert torch.equal(
        runner_module.forward_inference(obs)[Columns.ACTION_DIST_INPUTS],
        learner_module.forward_inference(obs)[Columns.ACTION_DIST_INPUTS],
    )


def test_an_inference_only_module_stays_in_eval_mode_so_rollout_calls_switch_no_submodule():
    runner_module, learner_module = mlp(inference_only=True), mlp()
    assert not any(module.training for module in runner_module.modules())
    switched = []
    runner_module.train = lambda mode=True: switched.append(mode)  # what TorchRLModule calls to switch back
    runner_module.forward_exploration({Columns.OBS: torch.randn(5, 4)})
    runner_module.forward_inference({Columns.OBS: torch.randn(5, 4)})
    assert switched == []
    assert learner_module.training  # a Learner's module trains as RLlib builds it


def test_a_training_module_switches_no_submodule_per_sgd_step_and_one_in_eval_mode_goes_back_to_train():
    module = mlp()
    switched = []
    train = module.train
    module.train = lambda mode=True: switched.append(mode) or train(mode)
    batch = {Columns.OBS: torch.randn(5, 4)}
    module.forward_train(batch)
    assert switched == []
    module.eval()
    switched.clear()
    module.forward_train(batch)
    assert switched == [True] and all(submodule.training for submodule in module.modules())


def test_sampling_runs_in_inference_mode_with_the_outputs_no_grad_gives():
    runner_module = mlp(inference_only=True)
    obs = {Columns.OBS: torch.randn(5, 4)}
    sampled = runner_module.forward_exploration(obs)[Columns.ACTION_DIST_INPUTS]
    with torch.no_grad():
        expected = runner_module._forward_exploration(obs)[Columns.ACTION_DIST_INPUTS]
    assert sampled.is_inference() and not expected.is_inference()
    assert torch.equal(sampled, expected)


def test_a_detach_design_keeps_value_gradients_out_of_the_shared_encoder():
    # The hook PPG's single-network variant uses: the value head reads detached features.
    class DetachedValueMLP(MLPModel):
        def value_head_input(self, embeddings):
            return embeddings.detach()

    module = DetachedValueMLP(
        observation_space=OBS_SPACE, action_space=DISCRETE, model_config={"vf_share_layers": True}
    )
    batch = {Columns.OBS: torch.randn(7, 4)}
    out = module.forward_train(batch)
    module.compute_values(batch, embeddings=out[Columns.EMBEDDINGS]).pow(2).sum().backward()
    assert all(p.grad is None for p in module.encoder.parameters())
    assert all(p.grad is not None for p in module.vf.parameters())


@pytest.mark.parametrize(
    "model_config, message",
    [
        ({"fcnet_hiddens": [32]}, r"unknown key\(s\) \['fcnet_hiddens'\]: MLPConfig reads"),
        ({"hidden_sizes": []}, "hidden_sizes must be a non-empty list"),
        ({"hidden_sizes": [8, 0]}, "every entry of hidden_sizes must be a positive int, got 0"),
        ({"activation": "gelu"}, r"activation must be one of \('tanh', 'relu'\)"),
        ({"vf_share_layers": 1}, "vf_share_layers must be True or False"),
        ({"iqn_value": {}}, r"unknown key\(s\) \['iqn_value'\]"),
    ],
)
def test_mlp_settings_errors_name_the_key(model_config, message):
    with pytest.raises(ValueError, match=message):
        mlp(**model_config)


@pytest.mark.parametrize(
    "model_config, message",
    [
        ({"d_model": 30, "n_heads": 4}, r"d_model \(30\) must be divisible by n_heads \(4\); choose e.g. d_model=32"),
        ({"memory_len": 0}, "memory_len must be a positive int"),
        ({"max_seq_len": 2.5}, "max_seq_len must be a positive int"),
    ],
)
def test_transformer_settings_errors_name_the_key(model_config, message):
    with pytest.raises(ValueError, match=message):
        TransformerModel(observation_space=OBS_SPACE, action_space=DISCRETE, model_config=model_config)


def test_unsupported_spaces_name_the_fix():
    with pytest.raises(ValueError, match="FlattenObservations"):
        MLPModel(observation_space=gym.spaces.Discrete(4), action_space=DISCRETE, model_config={})
    with pytest.raises(ValueError, match="Discrete and 1-D Box actions"):
        mlp(gym.spaces.MultiDiscrete([2, 2]))


def test_base_module_needs_an_encoder():
    with pytest.raises(NotImplementedError, match="build_encoder"):
        ActorCriticModule(observation_space=OBS_SPACE, action_space=DISCRETE, model_config={})
