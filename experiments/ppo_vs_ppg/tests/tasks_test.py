"""The comparison's parts: AUC, reference policies, settings, the PPG hyperparameters, the studies' grids."""

import importlib

import gymnasium
import pytest

from experiments.ppo_vs_ppg import ppg_tuning, ppo_vs_ppg, ppo_vs_ppg_mess3
from experiments.ppo_vs_ppg.task import stages, tasks
from rl.harness import UsageError

# Reference facts. Mess3's stationary distribution is uniform and the passive action costs no KL,
# so a passive episode of 64 steps (the controlled_mess3 env) earns 64/3 on average.
MESS3_PASSIVE_RETURN = 64 / 3


def test_area_under_curve_is_the_curve_mean_over_env_steps():
    assert stages.area_under_curve([[0, 0.0], [100, 100.0]]) == pytest.approx(50.0)
    # Unequal spacing weighs by env steps, not by points: 0 until step 90, then a ramp to 100.
    assert stages.area_under_curve([[0, 0.0], [90, 0.0], [100, 100.0]]) == pytest.approx(5.0)
    assert stages.area_under_curve([[2000, 37.0]]) == 37.0


def test_reference_policies_match_known_returns():
    references = stages.reference_returns("Mess3Control", episodes=400, seed=0)
    passive = references["passive"]
    assert abs(passive["mean"] - MESS3_PASSIVE_RETURN) < 4 * passive["standard_error"]
    # Tilting toward the target raises its occupancy (per episode always tilting even beats the
    # gamma-0.9 belief-optimal policy; it loses on the gamma-0.9 value from the start, where the first
    # tilts cost their KL before the process reaches the target); random tilts pay the KL without the gain.
    assert references["always tilt to state 0"]["mean"] > passive["mean"] > references["uniform random"]["mean"]
    # The exact ends of the score scale: passive is the best memoryless policy; belief-optimal 30.59.
    assert references["best memoryless (exact)"]["mean"] == pytest.approx(MESS3_PASSIVE_RETURN, abs=1e-3)
    assert references["belief-optimal (exact)"]["mean"] == pytest.approx(30.59, abs=0.01)
    cartpole = stages.reference_returns("CartPole-v1", episodes=20, seed=0)
    assert cartpole["ceiling"]["mean"] == gymnasium.spec("CartPole-v1").max_episode_steps


def test_ppo_and_ppg_share_every_ppo_setting_of_a_task():
    ppo_only = {"module", "learner"}
    for task in tasks.TASKS:
        ppo = tasks.settings_of(task, "PPO", smoke=False)
        ppg = tasks.settings_of(task, "PPG", smoke=False)
        for key, value in ppo.items():
            if key not in ppo_only and key != "model_config":
                assert ppg[key] == value, (task, key)
        assert ppg["learner"].endswith("PPGTorchLearner")
        assert ppg["model_config"]["vf_share_layers"] is True  # the detach design's single encoder
    # The tuned value coefficients follow each task's return scale (docs/ppg.md).
    assert tasks.settings_of("CartPole-v1", "PPG", smoke=False)["aux_value_loss_coeff"] == 0.001
    assert tasks.settings_of("Mess3Control", "PPG", smoke=False)["aux_value_loss_coeff"] == 1.0


def test_unknown_task_or_algorithm_is_named():
    with pytest.raises(ValueError, match="unknown task 'Pong'.*CartPole-v1"):
        tasks.config_for("Pong", "PPO", smoke=True)
    with pytest.raises(ValueError, match="unknown algorithm 'A2C'"):
        tasks.config_for("CartPole-v1", "A2C", smoke=True)


def test_overrides_replace_the_tasks_settings():
    assert tasks.CARTPOLE_PPG["beta_clone"] != 3.0
    config = tasks.config_for("CartPole-v1", "PPG", smoke=False, overrides={"beta_clone": 3.0})
    assert config.beta_clone == 3.0
    assert config.aux_value_loss_coeff == tasks.CARTPOLE_PPG["aux_value_loss_coeff"]  # the rest unchanged


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_the_ppg_hyperparameters_default_to_the_tuned_settings_and_set_both_value_coefficients(task):
    declared = tasks.ppg_hyperparameters(task)
    tuned = tasks.settings_of(task, "PPG", smoke=False)
    defaults = tasks.ppg_overrides(declared.values({}))
    assert all(tuned[key] == value for key, value in defaults.items())  # a run without --set is the tuned PPG
    overrides = tasks.ppg_overrides(declared.values(declared.parse(["ppg/value_coefficient=0.01"])))
    assert overrides["aux_value_loss_coeff"] == overrides["aux_true_value_loss_coeff"] == 0.01
    with pytest.raises(UsageError, match="ppg/beta_clone"):
        declared.parse(["ppg/beta=3"])


def test_each_study_names_recipes_with_a_run_and_settings_they_declare():
    for study in (ppo_vs_ppg.STUDY, ppo_vs_ppg_mess3.STUDY, ppg_tuning.STUDY):
        for agent, module_name in study.agents.items():
            recipe = importlib.import_module(module_name)
            assert callable(recipe.run), module_name
            declared = recipe.HYPERPARAMETERS.defaults if hasattr(recipe, "HYPERPARAMETERS") else {}
            for setting in study.settings():
                assert {key for key, _ in setting} <= set(declared), (agent, setting)
    # PPO and PPG of a task are compared seed by seed; the tuning seeds are not the benchmark's.
    assert ppo_vs_ppg.STUDY.pairs == (("cartpole_ppg", "cartpole_ppo"), ("mess3_ppg", "mess3_ppo"))
    assert not set(ppg_tuning.STUDY.seeds) & set(ppo_vs_ppg.STUDY.seeds)
    # The tuning grid holds the tuned CartPole PPG (beta_clone 10, value coefficients 0.001).
    tuned = tasks.ppg_hyperparameters("CartPole-v1").defaults
    assert tuple(sorted(tuned.items())) in {tuple(sorted(setting)) for setting in ppg_tuning.STUDY.settings()}
