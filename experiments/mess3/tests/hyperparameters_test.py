"""The Mess3 recipes' --set hyperparameters reach the PPO config and both the trained and the random networks."""

import pytest

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3 import memoryless_agent, next_token_aux, oracle_belief, oracle_belief_separate_critic, reward_only
from rl.harness import UsageError


def test_ppo_settings_reach_the_config_and_defaults_stay_the_main_jobs():
    overrides = reward_only.HYPERPARAMETERS.parse(["ppo/lr=5e-4", "ppo/gamma=0.95", "ppo/num_epochs=2"])
    config = task.ppo_config(smoke=True, hyperparameters=reward_only.HYPERPARAMETERS.values(overrides))
    assert (config.lr, config.gamma, config.num_epochs, config.lambda_, config.entropy_coeff) == (5e-4, 0.95, 2, 0.9, 0.01)
    default = task.ppo_config(smoke=True)
    assert (default.lr, default.gamma, default.num_epochs) == (1e-3, 0.9, 4)


def test_a_transformer_size_reaches_the_trained_and_the_random_network():
    values = reward_only.HYPERPARAMETERS.values(reward_only.HYPERPARAMETERS.parse(["model/d_model=16"]))
    model_config = task.transformer_config(values)
    assert model_config == {**task.MODEL_CONFIG, "d_model": 16}
    network = task.build_random_network(0, model_config=model_config)
    assert sum(parameter.numel() for parameter in network.parameters()) < sum(
        parameter.numel() for parameter in task.build_random_network(0).parameters())
    assert task.transformer_config(values, next_token_aux.MODEL_CONFIG)[next_token_aux.NAMESPACE] == {"num_tokens": 3}


@pytest.mark.parametrize("recipe", [memoryless_agent, oracle_belief, oracle_belief_separate_critic])
def test_mlp_recipes_declare_ppo_settings_only(recipe):
    assert set(recipe.HYPERPARAMETERS.defaults) == set(task.PPO_HYPERPARAMETERS)
    with pytest.raises(UsageError, match="unknown hyperparameter"):
        recipe.HYPERPARAMETERS.parse(["model/d_model=16"])


def test_the_seed_project_size_is_a_set_of_declared_hyperparameters():
    values = reward_only.HYPERPARAMETERS.values(
        reward_only.HYPERPARAMETERS.parse([f"{name}={value}" for name, value in task.SEED_PROJECT_SIZE.items()]))
    model_config = task.transformer_config(values)
    assert model_config == {**task.MODEL_CONFIG, "d_model": 96, "n_heads": 4, "n_layers": 3, "feedforward_dim": 384}
