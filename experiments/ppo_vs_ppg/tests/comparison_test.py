"""The benchmark's parts: AUC, summary, reference policies, settings, one tiny run, the figure."""

import gymnasium
import numpy as np
import pytest

from experiments.ppo_vs_ppg import comparison

# Reference facts. Mess3's stationary distribution is uniform and the passive action costs no KL,
# so a passive episode of 64 steps (the controlled_mess3 env) earns 64/3 on average.
MESS3_PASSIVE_RETURN = 64 / 3
# PPG's CPU buffer per CartPole env step: obs (4 float32) + loss mask (1 bool) + value target (1 float32).
CARTPOLE_BUFFER_BYTES_PER_STEP = 4 * 4 + 1 + 4


def test_area_under_curve_is_the_curve_mean_over_env_steps():
    assert comparison.area_under_curve([[0, 0.0], [100, 100.0]]) == pytest.approx(50.0)
    # Unequal spacing weighs by env steps, not by points: 0 until step 90, then a ramp to 100.
    assert comparison.area_under_curve([[0, 0.0], [90, 0.0], [100, 100.0]]) == pytest.approx(5.0)
    assert comparison.area_under_curve([[2000, 37.0]]) == 37.0


def test_summary_is_per_task_and_label_over_seeds():
    records = [
        {"task": "CartPole-v1", "label": "PPO", "final_return": 500.0, "area_under_curve": 300.0},
        {"task": "CartPole-v1", "label": "PPO", "final_return": 400.0, "area_under_curve": 200.0},
        {"task": "CartPole-v1", "label": "PPG", "final_return": 450.0, "aux_kl_max": 0.002},
        {"task": "CartPole-v1", "label": "PPG, beta_clone 10", "final_return": 490.0},
    ]
    summary = comparison.summarise(records)
    assert summary["CartPole-v1"]["PPO"]["final_return"] == {"mean": 450.0, "min": 400.0, "max": 500.0, "seeds": 2}
    assert summary["CartPole-v1"]["PPG"]["aux_kl_max"]["mean"] == 0.002
    assert summary["CartPole-v1"]["PPG, beta_clone 10"]["final_return"]["mean"] == 490.0  # variants apart
    assert "aux_kl_max" not in summary["CartPole-v1"]["PPO"]  # absent figures are left out, not zero


def test_reference_policies_match_known_returns():
    references = comparison.reference_returns("Mess3Control", episodes=400, seed=0)
    passive = references["passive"]
    assert abs(passive["mean"] - MESS3_PASSIVE_RETURN) < 4 * passive["standard_error"]
    # Tilting toward the target raises its occupancy (per episode always tilting even beats the
    # gamma-0.9 belief-optimal policy; it loses on the gamma-0.9 value from the start, where the first
    # tilts cost their KL before the process reaches the target); random tilts pay the KL without the gain.
    assert references["always tilt to state 0"]["mean"] > passive["mean"] > references["uniform random"]["mean"]
    # The exact ends of the score scale: passive is the best memoryless policy; belief-optimal 30.59.
    assert references["best memoryless (exact)"]["mean"] == pytest.approx(MESS3_PASSIVE_RETURN, abs=1e-3)
    assert references["belief-optimal (exact)"]["mean"] == pytest.approx(30.59, abs=0.01)
    cartpole = comparison.reference_returns("CartPole-v1", episodes=20, seed=0)
    assert cartpole["ceiling"]["mean"] == gymnasium.spec("CartPole-v1").max_episode_steps


def test_ppo_and_ppg_share_every_ppo_setting_of_a_task():
    ppo_only = {"module", "learner"}
    for task in comparison.TASKS:
        ppo = comparison.settings_of(task, "PPO", smoke=False)
        ppg = comparison.settings_of(task, "PPG", smoke=False)
        for key, value in ppo.items():
            if key not in ppo_only and key != "model_config":
                assert ppg[key] == value, (task, key)
        assert ppg["learner"].endswith("PPGTorchLearner")
        assert ppg["model_config"]["vf_share_layers"] is True  # the detach design's single encoder
    # The tuned value coefficients follow each task's return scale (docs/ppg.md).
    assert comparison.settings_of("CartPole-v1", "PPG", smoke=False)["aux_value_loss_coeff"] == 0.001
    assert comparison.settings_of("Mess3Control", "PPG", smoke=False)["aux_value_loss_coeff"] == 1.0


def test_unknown_task_or_algorithm_is_named():
    with pytest.raises(ValueError, match="unknown task 'Pong'.*CartPole-v1"):
        comparison.config_for("Pong", "PPO", smoke=True)
    with pytest.raises(ValueError, match="unknown algorithm 'A2C'"):
        comparison.config_for("CartPole-v1", "A2C", smoke=True)


def test_a_job_groups_under_its_label_or_algorithm():
    assert comparison.Job("CartPole-v1", "PPG", 1).group == "PPG"
    assert comparison.Job("CartPole-v1", "PPG", 1, label="PPG, beta_clone 10").group == "PPG, beta_clone 10"


def test_overrides_replace_the_tasks_settings():
    assert comparison.CARTPOLE_PPG["beta_clone"] != 3.0
    config = comparison.config_for("CartPole-v1", "PPG", smoke=False, overrides={"beta_clone": 3.0})
    assert config.beta_clone == 3.0
    assert config.aux_value_loss_coeff == comparison.CARTPOLE_PPG["aux_value_loss_coeff"]  # the rest unchanged


def test_a_tiny_ppg_run_records_its_curve_and_auxiliary_phase():
    job = comparison.Job("CartPole-v1", "PPG", 0, label="PPG, beta_clone 3", overrides=(("beta_clone", 3.0),))
    record = comparison.train_one(job, smoke=True)
    assert (record["label"], record["overrides"]) == ("PPG, beta_clone 3", {"beta_clone": 3.0})
    assert record["env_steps"] >= comparison.TASKS["CartPole-v1"].env_steps[True]
    assert len(record["curve"]) == 2  # two updates of 512 steps
    assert record["final_return"] == record["curve"][-1][1]
    assert record["aux_phases"] == 1  # after the second update (smoke: every 2)
    assert record["aux_buffer_bytes_per_env_step"] == CARTPOLE_BUFFER_BYTES_PER_STEP
    assert record["peak_rss_mib"] >= record["built_rss_mib"] > 0
    # The update peaks were measured: one policy-only update and one with the aux phase.
    assert record["policy_update_peak_rise_mib"] >= 0 and record["aux_update_peak_rise_mib"] >= 0


def test_the_figure_has_a_panel_per_task_with_labelled_axes_and_references():
    curve = [[1000, 10.0], [2000, 30.0], [3000, 50.0]]
    records = [{"task": task, "label": label, "seed": seed, "curve": [[x, y + seed] for x, y in curve]}
               for task in comparison.TASKS for label in comparison.ALGORITHMS for seed in (0, 1)]
    records.append({"task": "CartPole-v1", "label": "PPG, beta_clone 10", "seed": 0, "curve": curve})
    references = {"Mess3Control": {"passive": {"mean": 21.3, "standard_error": 0.1}}}
    figure = comparison.learning_curves_figure(records, references, title="test")
    axes = figure.get_axes()
    assert [axis.get_title() for axis in axes] == list(comparison.TASKS)
    for axis in axes:
        assert axis.get_xlabel() == "env steps sampled" and "return" in axis.get_ylabel()
    labels = [text.get_text() for text in axes[1].get_legend().get_texts()]
    assert labels == ["PPO: mean of 2 seeds (thin: each seed)", "PPG: mean of 2 seeds (thin: each seed)",
                      "passive: 21.3"]
    cartpole = [text.get_text() for text in axes[0].get_legend().get_texts()]
    assert cartpole[2] == "PPG, beta_clone 10: mean of 1 seeds (thin: each seed)"
    assert len({line.get_color() for line in axes[0].get_lines() if line.get_linewidth() > 2}) == 3
    # The thick line is the seed mean: seeds 0 and 1 differ by 1, so it runs 0.5 above the base curve.
    mean_line = [line for line in axes[0].get_lines() if line.get_linewidth() > 2][0]
    assert np.allclose(mean_line.get_ydata()[[0, -1]], [10.5, 50.5])
