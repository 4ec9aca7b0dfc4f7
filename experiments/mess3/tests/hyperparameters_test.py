"""The Mess3 recipes' --set hyperparameters reach the PPO config and both the trained and the random networks."""

import types

import pytest

from experiments.mess3 import (
    memoryless_agent,
    next_token_aux,
    oracle_belief_separate_critic,
    ppg,
    reward_only,
    reward_only_separate_critic,
)
from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import UsageError
from rl.harness.commands import cli
from rl.harness.errors import EXIT_USAGE
from rl.learners.ppg.defaults import PPG_DEFAULTS


def test_ppo_settings_reach_the_config_and_defaults_stay_the_main_jobs():
    overrides = reward_only.HYPERPARAMETERS.parse(["ppo/lr=5e-4", "ppo/gamma=0.95", "ppo/num_epochs=2"])
    config = task.ppo_config(smoke=True, hyperparameters=reward_only.HYPERPARAMETERS.values(overrides))
    assert (config.lr, config.gamma, config.num_epochs, config.lambda_, config.entropy_coeff) == (
        5e-4,
        0.95,
        2,
        0.9,
        0.01,
    )
    default = task.ppo_config(smoke=True)
    assert (default.lr, default.gamma, default.num_epochs) == (1e-3, 0.9, 4)


def test_a_transformer_size_reaches_the_trained_and_the_random_network():
    values = reward_only.HYPERPARAMETERS.values(reward_only.HYPERPARAMETERS.parse(["model/d_model=16"]))
    model_config = task.transformer_config(values)
    assert model_config == {**task.MODEL_CONFIG, "d_model": 16}
    network = task.build_random_network(0, model_config=model_config)
    assert sum(parameter.numel() for parameter in network.parameters()) < sum(
        parameter.numel() for parameter in task.build_random_network(0).parameters()
    )
    assert task.transformer_config(values, next_token_aux.MODEL_CONFIG)[next_token_aux.NAMESPACE] == {"num_tokens": 3}


@pytest.mark.parametrize("recipe", [memoryless_agent, oracle_belief_separate_critic])
def test_mlp_recipes_declare_ppo_settings_only(recipe):
    assert set(recipe.HYPERPARAMETERS.defaults) - {oracle_belief_separate_critic.SHARE_LAYERS} == set(
        task.PPO_HYPERPARAMETERS
    )
    with pytest.raises(UsageError, match="unknown hyperparameter"):
        recipe.HYPERPARAMETERS.parse(["model/d_model=16"])


def test_the_seed_project_size_is_a_set_of_declared_hyperparameters():
    values = reward_only.HYPERPARAMETERS.values(
        reward_only.HYPERPARAMETERS.parse([f"{name}={value}" for name, value in task.SEED_PROJECT_SIZE.items()])
    )
    model_config = task.transformer_config(values)
    assert model_config == {**task.MODEL_CONFIG, "d_model": 96, "n_heads": 4, "n_layers": 3, "feedforward_dim": 384}


@pytest.mark.parametrize("recipe", [reward_only, next_token_aux, reward_only_separate_critic, ppg])
def test_the_transformers_rules_name_the_set_to_type(recipe):
    with pytest.raises(UsageError) as raised:
        recipe.HYPERPARAMETERS.parse(["model/n_heads=5"])
    assert str(raised.value) == (
        "--set model/n_heads=5: the Transformer's d_model (32) must be divisible by n_heads (5);"
        " type e.g. --set model/d_model=30 or --set model/n_heads=4"
    )
    with pytest.raises(
        UsageError, match=r"^--set model/n_heads=0: out of range; model/n_heads must be >= 1 \(default 2\)$"
    ):
        recipe.HYPERPARAMETERS.parse(["model/n_heads=0"])
    assert recipe.HYPERPARAMETERS.parse(["model/d_model=40", "model/n_heads=5"]) == {
        "model/d_model": 40,
        "model/n_heads": 5,
    }


def test_a_bad_combination_stops_before_any_record(tmp_path, capsys):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    status = cli.main(
        [
            "rl-harness",
            "experiments.mess3.reward_only",
            "--smoke",
            "--set",
            "model/n_heads=5",
            "--results-dir",
            str(results),
            "--artifacts-dir",
            str(artifacts),
        ]
    )
    assert status == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--set model/d_model=30" in error
    assert not results.exists() and not artifacts.exists()


def _run_config(recipe, assignments, monkeypatch):
    """What `recipe.run` hands the stages for these --set assignments (full budget; nothing trains)."""
    captured = {}
    monkeypatch.setattr(
        stages,
        "run",
        lambda context, config, *, budget, random_network: captured.update(
            config=config, budget=budget, random_network=random_network
        ),
    )
    values = recipe.HYPERPARAMETERS.values(recipe.HYPERPARAMETERS.parse(assignments))
    recipe.run(types.SimpleNamespace(smoke=False, hyperparameters=values))
    return captured


def test_the_separate_critic_agent_is_reward_only_with_a_value_transformer_of_its_own(monkeypatch):
    shared = _run_config(reward_only, [], monkeypatch)
    separate = _run_config(reward_only_separate_critic, ["model/d_model=16"], monkeypatch)
    model_config = separate["config"].rl_module_spec.model_config
    assert model_config == {**shared["config"].rl_module_spec.model_config, "vf_share_layers": False, "d_model": 16}
    assert separate["budget"] == shared["budget"] == stages.MAIN_JOB
    random = separate["random_network"](0)  # the random networks have the trained architecture: two encoders
    assert random.encoder_names() == ["encoder", "critic_encoder"] and random.critic_encoder.output_dim == 16


def test_ppg_trains_reward_only_s_budget_with_the_set_coefficients(monkeypatch):
    default = _run_config(ppg, [], monkeypatch)
    config = default["config"]
    assert default["budget"] == stages.MAIN_JOB
    # ppg_tuning's choice (checks/results/studies/20261205T133213Z-5849fa), not the paper's 1 and 1
    assert (config.beta_clone, config.aux_value_loss_coeff, config.aux_true_value_loss_coeff) == (3.0, 0.1, 0.1)
    assert (PPG_DEFAULTS["beta_clone"], PPG_DEFAULTS["aux_value_loss_coeff"]) == (1.0, 1.0)
    assert (config.policy_iterations_per_aux, config.lr) == (16, task.PPO_HYPERPARAMETERS["ppo/lr"])
    paper = _run_config(ppg, ["ppg/beta_clone=1", "ppg/value_coefficient=1", "ppo/lr=5e-4"], monkeypatch)["config"]
    assert (paper.beta_clone, paper.aux_value_loss_coeff, paper.aux_true_value_loss_coeff, paper.lr) == (
        1.0,
        1.0,
        1.0,
        5e-4,
    )


def test_the_oracle_shares_its_mlp_only_when_set(monkeypatch):
    def shares(assignments):
        config = _run_config(oracle_belief_separate_critic, assignments, monkeypatch)["config"]
        return config.rl_module_spec.model_config["vf_share_layers"]

    assert (shares([]), shares(["model/vf_share_layers=true"])) == (False, True)
