"""FusedGradientStepMixin: fused Adam everywhere, RLlib's gradient semantics with one finite check."""

import gymnasium as gym
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl.learners import ActorCriticPPOTorchLearner, IQNPPOTorchLearner, PPGConfig, QRPPOTorchLearner
from rl.learners.gradient_steps import all_finite, fused_adam
from rl.learners.models import MLPModel
from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin


class IQNMLPModel(IQNValueMixin, MLPModel):
    pass


class QRMLPModel(QRValueMixin, MLPModel):
    pass


def ppo_config(module_class=MLPModel, learner_class=ActorCriticPPOTorchLearner, model_config=None, **learner_config):
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config or {}))
        .training(vf_loss_coeff=0.0 if learner_config else 1.0)
        .learners(learner_class=learner_class, learner_config_dict=learner_config)
    )


def build(config):
    torch.manual_seed(0)
    return config.build_learner(env=gym.make("CartPole-v1"))


@pytest.mark.parametrize(
    "config",
    [
        ppo_config(),
        ppo_config(IQNMLPModel, IQNPPOTorchLearner, {"iqn_value": {}}, **{"iqn_value/loss_coefficient": 0.5}),
        ppo_config(QRMLPModel, QRPPOTorchLearner, {"qr_value": {}}, **{"qr_value/loss_coefficient": 0.5}),
        PPGConfig().environment("CartPole-v1"),
    ],
    ids=["actor_critic", "iqn", "qr", "ppg"],
)
def test_every_learner_registers_a_fused_adam(config):
    learner = build(config)
    optimizer = learner.get_optimizer(DEFAULT_MODULE_ID)
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.param_groups[0]["fused"] is True
    assert optimizer.param_groups[0]["lr"] == config.lr  # the registered schedule still sets it
    for aux_optimizer in getattr(learner, "_aux_optimizers", {}).values():  # PPG's unregistered one
        assert aux_optimizer.param_groups[0]["fused"] is True


def test_fused_adam_stays_fused_when_it_loads_an_unfused_state():
    parameter = torch.nn.Parameter(torch.ones(3))
    unfused = torch.optim.Adam([parameter])
    parameter.grad = torch.tensor([1.0, -2.0, 3.0])
    unfused.step()
    optimizer = fused_adam([parameter])
    optimizer.load_state_dict(unfused.state_dict())
    assert optimizer.param_groups[0]["fused"] is True
    assert torch.equal(optimizer.state[parameter]["exp_avg"], unfused.state[parameter]["exp_avg"])


def test_all_finite_catches_nan_and_inf_anywhere():
    finite = [torch.ones(3), torch.zeros(2, 2)]
    assert all_finite(finite) and all_finite([])
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert not all_finite([torch.ones(3), torch.tensor([[0.0, bad]])])
        assert not all_finite([torch.ones(3, dtype=torch.float64), torch.tensor([bad])])  # mixed dtypes
    # Finite values whose squares overflow: finite, whatever a norm of them would read.
    assert all_finite([torch.full((4,), 3e38), torch.tensor([-3e38])])


def test_all_finite_leaves_every_value_bit_for_bit():
    tiny = torch.finfo(torch.float32).tiny
    values = torch.tensor([0.0, -0.0, tiny / 8, -tiny / 3, 1e-30, -7.25, 3e38, float("nan"), float("inf")])
    tensors = [values.clone(), values[:6].clone(), torch.randn(5, 3)]
    before = [tensor.clone() for tensor in tensors]
    all_finite(tensors)
    for tensor, original in zip(tensors, before):
        assert torch.equal(tensor.view(torch.int32), original.view(torch.int32))


def twin_learners(**config_overrides):
    """Two identical Learners: one applies gradients through the mixin, the other through RLlib."""
    config = ppo_config().framework(**config_overrides)
    ours, rllib = build(config), build(config)
    rllib.module.set_state(ours.module.get_state())
    return ours, rllib


def apply_both(ours, rllib, fill_gradient):
    """Applies the same gradients (set by `fill_gradient(index, param)`) to both Learners."""

    def rllib_apply(gradients):
        TorchLearner.apply_gradients(rllib, gradients)

    for learner, apply in ((ours, ours.apply_gradients), (rllib, rllib_apply)):
        gradients = {}
        for index, (ref, param) in enumerate(learner._params.items()):
            param.grad = fill_gradient(index, param)
            gradients[ref] = param.grad
        apply(gradients)


def parameters(learner):
    return [p.detach().clone() for p in learner.module[DEFAULT_MODULE_ID].parameters()]


def test_finite_gradients_take_the_step_rllib_takes_with_one_finite_check(monkeypatch):
    ours, rllib = twin_learners()
    checks = []
    isfinite, fused_check = torch.isfinite, torch._amp_foreach_non_finite_check_and_unscale_
    monkeypatch.setattr(torch, "isfinite", lambda tensor: checks.append("per tensor") or isfinite(tensor))
    monkeypatch.setattr(
        torch, "_amp_foreach_non_finite_check_and_unscale_", lambda *args: checks.append("fused") or fused_check(*args)
    )
    apply_both(ours, rllib, lambda index, param: torch.full_like(param, 0.1 * (index + 1)))
    # RLlib checks every gradient twice; the mixin all of them once, in one kernel.
    assert checks.count("per tensor") == 2 * len(ours._params) and checks.count("fused") == 1
    for mine, reference in zip(parameters(ours), parameters(rllib)):
        assert torch.equal(mine, reference)
    assert not torch.equal(parameters(ours)[0], parameters(build(ppo_config()))[0])  # a step was taken


@pytest.mark.parametrize("skip_nan_gradients", [False, True])
def test_non_finite_gradients_keep_rllibs_zeroing_and_skipping(skip_nan_gradients):
    ours, rllib = twin_learners(torch_skip_nan_gradients=skip_nan_gradients)

    def gradient(index, param):
        values = torch.full_like(param, 0.1)
        if index == 0:
            values.view(-1)[0] = float("nan")
        return values

    apply_both(ours, rllib, gradient)
    for mine, reference in zip(parameters(ours), parameters(rllib)):
        torch.testing.assert_close(mine, reference, rtol=0, atol=0, equal_nan=True)
    # RLlib zeroes nan gradients by default and steps; with torch_skip_nan_gradients it steps on them.
    assert parameters(ours)[0].isnan().any() == skip_nan_gradients


def gradients_of(learner, compute, postprocess):
    """The gradients of a fixed loss (every parameter's squared sum, a stale gradient left on each first)."""
    module = learner.module[DEFAULT_MODULE_ID]
    for param in module.parameters():
        param.grad = torch.full_like(param, 7.0)  # stale: RLlib clears it before the backward pass
    loss = sum(((param - 0.5 * index) ** 2).sum() for index, param in enumerate(module.parameters()))
    return postprocess(compute({DEFAULT_MODULE_ID: loss}))


@pytest.mark.parametrize("grad_clip", [None, 1e-3])
def test_the_lean_gradient_hooks_give_rllibs_gradients(grad_clip):
    config = ppo_config().training(grad_clip=grad_clip)
    ours, rllib = build(config), build(config)
    mine = gradients_of(ours, ours.compute_gradients, ours.postprocess_gradients)
    reference = gradients_of(
        rllib,
        lambda losses: TorchLearner.compute_gradients(rllib, losses),
        lambda gradients: TorchLearner.postprocess_gradients(rllib, gradients),
    )
    assert len(mine) == len(reference) == len(ours._params)  # keyed by each Learner's own parameters, in order
    for (ref, gradient), expected in zip(mine.items(), reference.values()):
        assert ref in ours._params and torch.equal(gradient, expected)
    unclipped = gradients_of(ours, lambda losses: TorchLearner.compute_gradients(ours, losses), lambda g: g)
    clipped = any(not torch.equal(mine[ref], unclipped[ref]) for ref in mine)
    assert clipped == (grad_clip is not None)  # a clipping config still goes through RLlib's clipping
