"""IndexedMinibatchIterator yields RLlib's MiniBatchCyclicIterator's minibatches (rl/learners/minibatches.py)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.minibatch_utils import MiniBatchCyclicIterator

from rl.learners import ActorCriticPPOTorchLearner
from rl.learners.minibatches import IndexedMinibatchIterator
from rl.learners.models import MLPModel, TransformerModel

MODELS = {
    "mlp": (MLPModel, {"hidden_sizes": [8]}),
    "transformer": (TransformerModel, {"d_model": 8, "n_heads": 2, "n_layers": 1, "memory_len": 4, "max_seq_len": 8}),
}


def learner_and_episodes(model):
    module_class, model_config = MODELS[model]
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))
        .training(train_batch_size_per_learner=200, minibatch_size=48, num_epochs=3)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
        .learners(learner_class=ActorCriticPPOTorchLearner)
    )
    torch.manual_seed(0)
    episodes = SingleAgentEnvRunner(config=config).sample(num_timesteps=200, random_actions=True)
    return config.build_learner(env=gym.make("CartPole-v1")), episodes


def training_batch(learner, episodes):
    """The MultiAgentBatch Learner.update builds its iterator over (a fresh one: RLlib's iterator shuffles it in place)."""
    batch = learner._make_batch_if_necessary(TrainingData(episodes=copy.deepcopy(episodes)))
    return learner._set_slicing_by_batch_id(batch, value=True)


def flat(value, prefix=""):
    if isinstance(value, dict):
        return {name: tensor for key, item in value.items() for name, tensor in flat(item, f"{prefix}/{key}").items()}
    return {prefix: value}


def minibatches(iterator_class, learner, episodes, **options):
    np.random.seed(0)
    return list(iterator_class(training_batch(learner, episodes), **options))


@pytest.mark.parametrize(
    "options",
    [
        {"num_epochs": 3, "minibatch_size": 48, "shuffle_batch_per_epoch": True},
        {
            "num_epochs": 2,
            "minibatch_size": 200,
            "shuffle_batch_per_epoch": False,
        },  # a whole epoch and a bit per minibatch
        {"minibatch_size": 40, "num_total_minibatches": 7, "shuffle_batch_per_epoch": True},
    ],
)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_minibatches_are_rllibs(model, options):
    learner, episodes = learner_and_episodes(model)
    ours = minibatches(IndexedMinibatchIterator, learner, episodes, **options)
    rllib = minibatches(MiniBatchCyclicIterator, learner, episodes, **options)
    assert len(ours) == len(rllib) > 1
    for mine, reference in zip(ours, rllib):
        assert mine.env_steps() == reference.env_steps()
        assert mine.policy_batches.keys() == reference.policy_batches.keys()
        for module_id, reference_batch in reference.policy_batches.items():
            assert len(mine.policy_batches[module_id]) == len(reference_batch)
            mine_columns, reference_columns = flat(dict(mine.policy_batches[module_id])), flat(dict(reference_batch))
            assert mine_columns.keys() == reference_columns.keys()
            for name, tensor in reference_columns.items():
                assert torch.equal(mine_columns[name], tensor), name


def test_the_learner_iterates_with_it_over_tensor_batches_only():
    learner, episodes = learner_and_episodes("transformer")
    iterator = learner._create_iterator_if_necessary(
        training_data=TrainingData(episodes=copy.deepcopy(episodes)), num_epochs=2, minibatch_size=48
    )
    assert type(iterator) is IndexedMinibatchIterator
    batch = training_batch(learner, episodes)
    for module_batch in batch.policy_batches.values():
        module_batch["numpy_column"] = np.zeros(len(module_batch[next(iter(module_batch))]))
    rllib_iterator = MiniBatchCyclicIterator(batch, minibatch_size=48)
    assert IndexedMinibatchIterator.replacing(rllib_iterator) is rllib_iterator
