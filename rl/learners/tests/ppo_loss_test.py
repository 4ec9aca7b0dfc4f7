"""ActorCriticPPOTorchLearner's PPO loss, metrics and SGD steps equal RLlib's PPOTorchLearner's (rl/learners/ppo/)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.ppo import LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rl.learners import ActorCriticPPOTorchLearner
from rl.learners.minibatches import select_rows
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.ppo.learner import chunks_with_loss_steps
from rl.learners.tests.nests import assert_same_nest
from rl.learners.tests.token_env import TokenTransitionEnv
from rl.losses.masking import masked_means

TRANSFORMER = {"d_model": 16, "n_heads": 2, "n_layers": 1, "feedforward_dim": 32, "memory_len": 8, "max_seq_len": 8}
MODELS = {"mlp": (MLPModel, {"hidden_sizes": [16]}), "transformer": (TransformerModel, TRANSFORMER)}


class RLlibLossLearner(ActorCriticPPOTorchLearner):
    """The same Learner with RLlib's own loss and per-step off-policyness and step counter logging."""

    compute_loss_for_module = PPOTorchLearner.compute_loss_for_module
    _compute_off_policyness = TorchLearner._compute_off_policyness
    _log_steps_trained_metrics = Learner._log_steps_trained_metrics
    _log_metrics = Learner._log_metrics


class AllChunksLearner(ActorCriticPPOTorchLearner):
    """The same Learner training on every chunk of the batch, as RLlib's Learner does."""

    def _make_batch_if_necessary(self, training_data):
        with torch.no_grad():
            return Learner._make_batch_if_necessary(self, training_data)


def ppo_config(model, learner_class=ActorCriticPPOTorchLearner, **training):
    module_class, model_config = MODELS[model]
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))
        .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=2, **training)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
        .learners(learner_class=learner_class)
    )


def build(config):
    torch.manual_seed(0)
    return config.build_learner(env=gym.make("CartPole-v1"))


def sample(config):
    torch.manual_seed(0)
    return SingleAgentEnvRunner(config=config).sample(num_timesteps=256, random_actions=False)


def first_minibatch(learner, episodes):
    """The first (tensor) minibatch `learner.update` trains on."""
    caught = []
    original = learner._update

    def catch(batch, **kwargs):
        caught.append(batch)
        raise StopIteration

    learner._update = catch
    with pytest.raises(StopIteration):
        learner.update(episodes=copy.deepcopy(episodes), num_epochs=1, minibatch_size=64)
    learner._update = original
    return caught[0]


def loss_and_gradients(learner, batch, loss_fn):
    module = learner.module[DEFAULT_MODULE_ID]
    module.zero_grad(set_to_none=True)
    fwd_out = learner.module.forward_train(batch)[DEFAULT_MODULE_ID]
    loss = loss_fn(
        learner,
        module_id=DEFAULT_MODULE_ID,
        config=learner.config.get_config_for_module(DEFAULT_MODULE_ID),
        batch=batch[DEFAULT_MODULE_ID],
        fwd_out=fwd_out,
    )
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in module.parameters()]


@pytest.mark.parametrize("use_kl_loss", [True, False])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_loss_and_gradients_equal_rllibs(model, use_kl_loss):
    config = ppo_config(model, use_kl_loss=use_kl_loss, entropy_coeff=0.01, vf_clip_param=0.5)
    learner = build(config)
    batch = first_minibatch(learner, sample(config))
    with torch.no_grad():  # a policy that differs from the sampling one: a KL > 0 and clipped ratios
        for parameter in learner.module[DEFAULT_MODULE_ID].parameters():
            parameter.add_(torch.randn_like(parameter), alpha=0.3)
    ours, our_gradients = loss_and_gradients(learner, batch, ActorCriticPPOTorchLearner.compute_loss_for_module)
    rllib, rllib_gradients = loss_and_gradients(learner, batch, PPOTorchLearner.compute_loss_for_module)
    torch.testing.assert_close(ours, rllib, rtol=1e-6, atol=1e-7)
    for mine, reference in zip(our_gradients, rllib_gradients):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-7)


def flat_results(results, prefix=()):
    flat = {}
    for key, value in results.items():
        if isinstance(value, dict):
            flat.update(flat_results(value, prefix + (key,)))
        elif not any("throughput" in part or "timer" in part for part in map(str, prefix + (key,))):
            flat[prefix + (key,)] = float(value.item() if isinstance(value, torch.Tensor) else value)
    return flat


def two_updates(learner, episodes, *, minibatch_size):
    """The flat results of two updates on `episodes` (2 epochs, shuffle seeded) and the weights after them."""
    np.random.seed(0)  # the minibatch shuffle
    results = [
        flat_results(
            learner.update(
                episodes=copy.deepcopy(episodes),
                num_epochs=2,
                minibatch_size=minibatch_size,
                shuffle_batch_per_epoch=True,
            )
        )
        for _ in range(2)
    ]
    return results, [p.detach() for p in learner.module[DEFAULT_MODULE_ID].parameters()]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_an_update_logs_rllibs_metrics_and_takes_its_steps(model):
    """Two updates: the same metric keys and values (KL coefficient included) and the same weights."""
    config = ppo_config(model, kl_coeff=0.3, kl_target=1e-4)  # the KL coefficient moves
    episodes = sample(config)
    our_results, our_weights = two_updates(build(config), episodes, minibatch_size=64)
    rllib_results, rllib_weights = two_updates(
        build(config.copy(copy_frozen=False).learners(learner_class=RLlibLossLearner)), episodes, minibatch_size=64
    )
    for ours, rllib in zip(our_results, rllib_results):
        assert ours.keys() == rllib.keys()
        for key in rllib:
            assert ours[key] == pytest.approx(rllib[key], rel=1e-5, abs=1e-7, nan_ok=True), key
    for mine, reference in zip(our_weights, rllib_weights):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)


def counted_trained_steps(learner) -> list:
    """The (counter name, value) of each increment of the Learner's two Prometheus counters of trained steps."""
    counted = []
    for counter in (
        learner._metrics_all_modules_num_env_steps_trained,
        learner._metrics_all_modules_num_module_steps_trained,
    ):
        add = counter.inc
        counter.inc = lambda value=1.0, tags=None, name=counter.info["name"], add=add: (
            counted.append((name, value)) or add(value, tags)
        )
    return counted


def test_rays_trained_step_counters_count_what_rllibs_learner_counts():
    config = ppo_config("transformer")
    episodes = sample(config)
    totals, calls = [], []
    for learner_config in (config.copy(copy_frozen=False).learners(learner_class=RLlibLossLearner), config):
        learner = build(learner_config)
        counted = counted_trained_steps(learner)
        two_updates(learner, episodes, minibatch_size=64)
        totals.append({name: sum(value for named, value in counted if named == name) for name, _ in counted})
        calls.append(len(counted))
    assert totals[0] == totals[1] and len(totals[0]) == 2 and min(totals[0].values()) > 0
    assert calls[1] == 2 * 2 < calls[0]  # each counter once an update, not once an SGD step


def test_masked_means_sum_the_valid_steps_of_each_term():
    terms = torch.tensor([[[1.0, 2.0], [3.0, 100.0]], [[4.0, 5.0], [6.0, float("nan")]]])
    mask = torch.tensor([[True, True], [True, False]])
    assert torch.equal(masked_means(terms, mask), torch.tensor([2.0, 5.0]))  # masked nan never reaches it
    assert torch.equal(masked_means(terms[:, 0], None), torch.tensor([1.5, 4.5]))


# 16-step episodes in 8-step chunks: each episode's artificial bootstrap step opens a third
# chunk with no loss step, as the main job's 64-step episodes do in 16-step chunks.
WHOLE_CHUNK_EPISODES = {"episode_length": 16}


def whole_chunk_config(learner_class=ActorCriticPPOTorchLearner):
    return (
        PPOConfig()
        .environment(TokenTransitionEnv, env_config=WHOLE_CHUNK_EPISODES)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=TransformerModel, model_config=TRANSFORMER))
        .training(train_batch_size_per_learner=128, minibatch_size=32, num_epochs=2, entropy_coeff=0.01)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
        .learners(learner_class=learner_class)
    )


def build_whole_chunk_learner(config):
    torch.manual_seed(0)
    return config.build_learner(env=TokenTransitionEnv(WHOLE_CHUNK_EPISODES))


def train_batch(learner, episodes):
    """The MultiAgentBatch `learner.update` cuts its minibatches from."""
    return learner._make_batch_if_necessary(TrainingData(episodes=copy.deepcopy(episodes)))


def test_the_train_batch_keeps_the_chunks_with_loss_steps_and_a_minibatch_the_same_loss():
    episodes = sample(whole_chunk_config())
    full = train_batch(build_whole_chunk_learner(whole_chunk_config(AllChunksLearner)), episodes)[DEFAULT_MODULE_ID]
    kept = train_batch(build_whole_chunk_learner(whole_chunk_config()), episodes)[DEFAULT_MODULE_ID]
    mask = full[Columns.LOSS_MASK]
    kept_rows = [row for row in range(len(mask)) if bool(mask[row].any())]
    # 256 steps, 16 episodes of 16 in 8-step chunks: 2 chunks each with loss steps, a third with the bootstrap step only.
    assert (len(mask), len(kept_rows)) == (48, 32)
    for column in (Columns.OBS, Columns.LOSS_MASK, Columns.ADVANTAGES, Columns.VALUE_TARGETS, Columns.SEQ_LENS):
        assert torch.equal(kept[column], full[column][kept_rows]), column
    for key, state in full[Columns.STATE_IN]["encoder"].items():
        assert torch.equal(kept[Columns.STATE_IN]["encoder"][key], state[kept_rows]), key
    assert (len(full), len(kept)) == (
        16 * 17,
        16 * 16,
    )  # RLlib counts the bootstrap steps, the kept batch its loss steps
    # RLlib's first minibatch of 5 chunks on the whole batch holds a chunk with no loss step (row 2).
    on_all = {DEFAULT_MODULE_ID: select_rows(dict(full), torch.arange(5))}
    on_kept = {DEFAULT_MODULE_ID: chunks_with_loss_steps(on_all[DEFAULT_MODULE_ID])}
    assert torch.equal(on_kept[DEFAULT_MODULE_ID][Columns.SEQ_LENS], full[Columns.SEQ_LENS][[0, 1, 3, 4]])
    learner = build_whole_chunk_learner(whole_chunk_config())
    loss_on_all, gradients_on_all = loss_and_gradients(
        learner, on_all, ActorCriticPPOTorchLearner.compute_loss_for_module
    )
    loss_on_kept, gradients_on_kept = loss_and_gradients(
        learner, on_kept, ActorCriticPPOTorchLearner.compute_loss_for_module
    )
    torch.testing.assert_close(loss_on_kept, loss_on_all, rtol=1e-6, atol=1e-7)
    for kept_gradient, gradient in zip(gradients_on_kept, gradients_on_all):
        torch.testing.assert_close(kept_gradient, gradient, rtol=1e-5, atol=1e-7)
    batch_without_time_axis = {Columns.LOSS_MASK: torch.ones(4, dtype=torch.bool), Columns.OBS: torch.zeros(4, 3)}
    assert chunks_with_loss_steps(batch_without_time_axis) is batch_without_time_axis


def test_an_update_takes_the_plain_loops_minibatches_and_rllibs_steps_on_them():
    """One update: as many SGD steps as the plain loop (epochs x loss steps / minibatch size), and
    the weights and metrics of RLlib's update on the batch of the chunks with loss steps.

    RLlib's explained variance reads every step of the last minibatch, padding included, and its
    step counters count the bootstrap steps of the episodes it was given, so those may differ.
    """
    episodes = sample(whole_chunk_config())
    learner = build_whole_chunk_learner(whole_chunk_config())
    steps = []
    original = learner._update
    learner._update = lambda batch, **kwargs: steps.append(batch) or original(batch, **kwargs)
    np.random.seed(0)  # the minibatch shuffle
    ours = flat_results(
        learner.update(episodes=copy.deepcopy(episodes), num_epochs=2, minibatch_size=32, shuffle_batch_per_epoch=True)
    )
    assert len(steps) == 2 * 256 // 32  # on all 48 chunks RLlib cuts minibatches of 5: 20 steps
    assert all(len(batch[DEFAULT_MODULE_ID][Columns.SEQ_LENS]) == 32 // 8 for batch in steps)
    reference_learner = build_whole_chunk_learner(whole_chunk_config(AllChunksLearner))
    full = train_batch(reference_learner, episodes)
    kept = MultiAgentBatch(
        {
            DEFAULT_MODULE_ID: SampleBatch(
                chunks_with_loss_steps(dict(full[DEFAULT_MODULE_ID])), _zero_padded=True, _max_seq_len=8
            )
        },
        full.env_steps(),
    )
    np.random.seed(0)
    reference = flat_results(
        reference_learner.update(batch=kept, num_epochs=2, minibatch_size=32, shuffle_batch_per_epoch=True)
    )
    compared = [key for key in reference if LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY not in key and "steps" not in key[-1]]
    assert len(compared) > 10
    for key in compared:
        assert ours[key] == pytest.approx(reference[key], rel=1e-5, abs=1e-6, nan_ok=True), key
    for mine, theirs in zip(
        learner.module[DEFAULT_MODULE_ID].parameters(), reference_learner.module[DEFAULT_MODULE_ID].parameters()
    ):
        torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_sampling_and_updates_are_the_same_bits_without_torchs_fill_of_new_tensors(model, monkeypatch):
    """With deterministic algorithms (RLlib's seeding turns them on), torch fills every new tensor with NaN.

    The harness turns the fill off (`hardware.skip_uninitialized_fill`): the same bits, since nothing reads a
    tensor's memory before writing it; a read would carry the NaN into the results.
    """
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        runs = []
        for fill in (True, False):
            torch.utils.deterministic.fill_uninitialized_memory = fill
            config = ppo_config(model).debugging(seed=0)  # RLlib seeds the envs too
            episodes = sample(config)
            results, weights = two_updates(build(config), episodes, minibatch_size=64)
            sampled = [
                (e.get_actions(), {key: e.get_extra_model_outputs(key) for key in e.extra_model_outputs})
                for e in episodes
            ]
            runs.append((sampled, results, weights))
    finally:
        torch.use_deterministic_algorithms(deterministic)
    (filled_episodes, filled_results, filled_weights), (episodes, results, weights) = runs
    for (filled_actions, filled_outputs), (actions, outputs) in zip(filled_episodes, episodes, strict=True):
        np.testing.assert_array_equal(filled_actions, actions)
        assert_same_nest(filled_outputs, outputs)
    assert filled_results == results
    for filled, weight in zip(filled_weights, weights, strict=True):
        assert torch.equal(filled, weight)
