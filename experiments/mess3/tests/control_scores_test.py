"""control_scores' references and per-step mean rewards, against values worked out by hand."""

import numpy as np
import pytest

from experiments.mess3.task import control_scores

# Mess3 x = 0.05: a state stays with probability 1 - 2x = 0.9. Passive (action 0, no KL): the mean
# reward is P(next state = 0): 0.9 from state 0, 0.05 from states 1 and 2.
PASSIVE_ROW = [0.9, 0.05, 0.05]


def test_mean_rewards_weigh_the_expected_rewards_by_the_belief():
    beliefs = np.array([[[1.0, 0.0, 0.0], [0.5, 0.25, 0.25]]])  # one episode, two steps
    rewards = control_scores.expected_step_rewards(beliefs, np.array([[0, 0]]))
    np.testing.assert_allclose(rewards, [[0.9, 0.5 * 0.9 + 0.5 * 0.05]])
    tilted = control_scores.references().expected_rewards[1]  # tilting toward state 0 costs a KL penalty
    assert tilted[0] < 0.9 + 1e-9 and (tilted[1:] < 0).all()
    np.testing.assert_allclose(control_scores.references().expected_rewards[0], PASSIVE_ROW, atol=1e-12)


def test_the_scales_run_from_the_best_memoryless_policy_to_the_belief_optimal_one():
    scales = control_scores.scales()
    # passive: 1/3 a step from the stationary start; the best memoryless policy at the defaults
    assert scales["value"].zero == pytest.approx((1 - 0.9**64) / 0.3, abs=1e-9)
    assert scales["episode_return"].zero == pytest.approx(64 / 3, abs=1e-9)
    assert scales["value"].one == pytest.approx(3.5104, abs=1e-3)  # rl/envs/README.md
    assert scales["episode_return"].one == pytest.approx(30.59, abs=0.01)


def test_training_curve_normalises_every_row_and_averages_the_last_ten():
    scale = control_scores.scales()["episode_return"]
    rows = [
        {"num_env_steps_sampled_lifetime": 2048 * i, "env_runners/episode_return_mean": float(i)} for i in range(1, 13)
    ]
    curve = control_scores.training_curve([{"training_iteration": 0}] + rows, scale)
    assert curve["env_steps"][0] == 2048 and len(curve["return"]) == 12
    assert curve["final_return"]["mean"] == pytest.approx(np.mean(np.arange(3, 13)))  # rows 3..12
    assert curve["normalised_return"][0] == pytest.approx((1.0 - scale.zero) / (scale.one - scale.zero))
    single = control_scores.training_curve(rows[:1], scale)["final_return"]
    assert (single["low"], single["mean"], single["high"], single["n"]) == (1.0, 1.0, 1.0, 1)
    none_ended = control_scores.training_curve(
        [{"training_iteration": 1, "num_env_steps_sampled_lifetime": 2048}], scale
    )
    assert none_ended["return"] == [] and none_ended["final_return"] is None
    assert none_ended["unavailable"] == (
        "no training return: no episode ended in the 1 training row(s) (env_runners/episode_return_mean in none)"
    )


def test_a_headline_without_a_training_return_says_none_and_keeps_the_evaluation():
    evaluated = {"normalised_value": {"mean": 0.5, "low": 0.4, "high": 0.6}}
    evaluated.update(value=evaluated["normalised_value"], normalised_episode_return=evaluated["normalised_value"])
    scores = {
        "evaluation": {"greedy": evaluated, "sampled": evaluated},
        "training": control_scores.training_curve([{"training_iteration": 1}], control_scores.scales()["value"]),
    }
    found = control_scores.headline(scores)
    assert found["final_training_return"] is None and found["final_training_normalised_return"] is None
    assert found["normalised_value"]["greedy"] == {"mean": 0.5, "low": 0.4, "high": 0.6}


def test_the_return_optimal_scale_uses_the_gamma_1_references():
    scale = control_scores.return_optimal_scale()
    assert scale.zero == pytest.approx(35.2595, abs=1e-3) and scale.one == pytest.approx(35.9129, abs=1e-3)  # README


def test_memory_use_counts_actions_that_the_observation_alone_does_not_fix():
    # observation A (4 steps): actions 0, 0, 1, 1 with target beliefs 0.2, 0.4, 0.8, 0.6;
    # observation B (2 steps): actions 1, 1 (a memoryless choice).
    observations = np.array([[1, 0]] * 4 + [[0, 1]] * 2)
    actions = np.array([0, 0, 1, 1, 1, 1])
    beliefs = np.array([0.2, 0.4, 0.8, 0.6, 0.5, 0.5])
    used = control_scores.memory_use(observations, actions, beliefs)
    assert used["history_dependent_fraction"] == pytest.approx(2 / 6)  # A's minority action, twice
    assert used["belief_gap"] == pytest.approx(0.7 - 0.3)  # only A has both; tilting at 0.7 vs 0.3
    memoryless = control_scores.memory_use(observations, np.array([0, 0, 0, 0, 1, 1]), beliefs)
    assert memoryless == {"history_dependent_fraction": 0.0, "belief_gap": 0.0}
