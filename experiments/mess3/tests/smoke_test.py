"""Slow: each Mess3 recipe's `--smoke` runs every stage (train, step-0 and log-spaced checkpoints,
scores against the exact references, probes of every checkpoint and of a random network, plots)
and records them; about 1 minute each.

One Bazel target per recipe selects its case with `-k <recipe>`.
"""

import json

import pytest

from experiments.common import smoke
from experiments.mess3.task import belief_geometry, control_scores
from rl.analysis.checkpoints import load_rl_module
from rl.analysis.probes import PROCESS_ROLLOUTS, UNIFORM_CONTEXTS

# At the defaults (gamma 0.9, 64 steps): passive earns 1/3 a step, value (1/3)(1 - 0.9^64)/0.1 = 3.3294
# and 64/3 per episode, and no memoryless policy does better; belief-optimal 3.5104 (rl/envs/README.md).
PASSIVE_VALUE, PASSIVE_RETURN, BELIEF_OPTIMAL_VALUE = (1 - 0.9**64) / 0.3, 64 / 3, 3.5104
LAYERS = ["residual_0", "residual_1", "residual_2"]  # the projected input and each of the 2 blocks
# A separate critic's encoder is probed too, its layers named by it.
CRITIC_LAYERS = {"reward_only_separate_critic": [f"critic_encoder/{layer}" for layer in LAYERS]}
# The metrics of each composition's swapped part: each must have a value in some row.
EXTRA_METRICS = {
    "reward_only": ["learners/default_policy/vf_loss"],
    "reward_only_separate_critic": ["learners/default_policy/vf_loss"],
    "next_token_aux": [
        "learners/default_policy/next_token_aux/loss",
        "learners/default_policy/next_token_aux/accuracy",
    ],
    "iqn_critic": ["learners/default_policy/iqn_value/loss", "learners/default_policy/iqn_value/quantile_spread"],
    "ppg": ["learners/default_policy/ppg/aux_value_loss", "learners/default_policy/ppg/aux_kl"],  # one aux phase
}


@pytest.mark.parametrize("recipe", sorted(EXTRA_METRICS))
def test_the_smoke_run_trains_checkpoints_and_probes(recipe, tmp_path):
    run = smoke.run_smoke(f"experiments/mess3/{recipe}", f"experiments.mess3.{recipe}", tmp_path)

    assert run.manifest["status"] == "completed"
    if run.built_with_bazel:
        assert run.manifest["build"]["target"] == f"//experiments/mess3:{recipe}"
    # Step 0 (the untrained network), then log-spaced (1, 2) and the last update.
    assert [c["iteration"] for c in run.manifest["checkpoints"]] == [0, 1, 2, 3]
    assert run.manifest["checkpoints"][0]["env_steps"] == 0
    sampling = run.manifest["runner"]["sampling"]  # the recipe's parallel envs, placed by the profile
    assert sampling["parallel_envs"] == 32
    assert max(sampling["num_env_runners"], 1) * sampling["num_envs_per_env_runner"] == 32
    # The harness's batched EnvRunner connector pipelines.
    assert sampling["connectors"] == {"env_to_module": "fast_vector_env", "module_to_env": "fast_vector_env"}
    rows = run.metrics()
    assert rows[-1]["num_env_steps_sampled_lifetime"] >= 3 * 1024  # the smoke budget: three updates of 1024
    # 32 envs x 32 steps per smoke update: the first 64-step episodes end in the second update.
    assert all("env_runners/episode_return_mean" in row for row in rows[1:])
    for metric in EXTRA_METRICS[recipe]:
        assert any(row.get(metric) is not None for row in rows), metric

    probed = LAYERS + CRITIC_LAYERS.get(recipe, [])
    record = json.loads((run.results_dir / "probe_report.json").read_text())
    assert [c["name"] for c in record["checkpoints"]] == ["iter_000000", "iter_000001", "iter_000002", "iter_000003"]
    for checkpoint in record["checkpoints"]:
        for kind in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS):
            layers = checkpoint["reports"][kind]["layers"]
            assert [layer["layer"] for layer in layers] == probed
            # Mess3 beliefs are far from constant: any policy-encoder layer beats the mean-belief
            # baseline (a critic trained three updates on values need not keep the belief affine).
            assert all(layer["test"]["r2"] > layer["baseline"]["r2"] for layer in layers[: len(LAYERS)])

    comparison = json.loads((run.results_dir / belief_geometry.COMPARISON_FILE).read_text())
    for kind in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS):
        rows = comparison["distributions"][kind]["layers"]
        assert sorted(rows) == sorted(probed)  # the JSON record's keys are sorted
        assert all(len(row["random_r2"]) == 1 for row in rows.values())  # one random network in smoke
        # The summary names the encoder each role reads: the critic's own, else the shared one.
        headline = run.summary["outcome"]["probe_r2"][kind]
        critic = "critic_encoder/residual_1" if recipe in CRITIC_LAYERS else "residual_1"
        assert headline["critic_encoder"]["residual_1"]["trained"] == round(rows[critic]["trained_r2"], 4)
        assert headline["policy_encoder"]["residual_1"] == headline["residual_1"]
        assert headline["residual_1"]["trained"] == round(rows["residual_1"]["trained_r2"], 4)
    for name in (
        "learning_curves.png",
        "probe_r2_uniform_contexts.png",
        "probe_r2_process_rollouts.png",
        "belief_simplex_uniform_contexts.png",
        "belief_simplex_process_rollouts.png",
        "belief_simplex_process_rollouts_random.png",
        "probe_r2_trained_vs_random.png",
    ):
        assert (run.artifacts_dir / name).stat().st_size > 0, name  # figures are artifacts
        assert not (run.results_dir / name).exists(), name
    assert set(run.summary["outcome"]["probe_r2"]) == {UNIFORM_CONTEXTS, PROCESS_ROLLOUTS}
    _check_scores(run)
    assert "results: " in run.stdout and smoke.RUN_ID in run.stdout  # it says where its results are


# What each MLP agent observes: the last token's one-hot (3) and the previous action's (4), or the
# exact belief over Mess3's 3 states.
MLP_OBSERVATION_SIZES = {"memoryless_agent": 3 + 4, "oracle_belief_separate_critic": 3}


@pytest.mark.parametrize("recipe", sorted(MLP_OBSERVATION_SIZES))
def test_the_mlp_agents_smoke_runs_train_and_score_on_what_they_observe(recipe, tmp_path):
    run = smoke.run_smoke(f"experiments/mess3/{recipe}", f"experiments.mess3.{recipe}", tmp_path)
    assert run.manifest["status"] == "completed"
    assert [c["iteration"] for c in run.manifest["checkpoints"]] == [0, 1, 2, 3]
    assert "probe_r2" not in run.summary["outcome"]  # an MLP has no residual stream over time
    last = run.artifacts_dir / run.manifest["checkpoints"][-1]["path"]
    assert load_rl_module(last).observation_space.shape == (MLP_OBSERVATION_SIZES[recipe],)
    _check_scores(run)


def _check_scores(run):
    scores = json.loads((run.results_dir / control_scores.SCORES_FILE).read_text())
    policies = scores["references"]["policies"]
    assert policies["memoryless"]["value"] == pytest.approx(PASSIVE_VALUE, abs=1e-9)
    assert policies["memoryless"]["episode_return"] == pytest.approx(PASSIVE_RETURN, abs=1e-9)
    assert policies["belief_optimal"]["value"] == pytest.approx(BELIEF_OPTIMAL_VALUE, abs=1e-3)
    assert scores["checkpoint"] == "iter_000003"
    for mode in ("sampled", "greedy"):
        evaluation = scores["evaluation"][mode]
        assert evaluation["episodes"] == control_scores.EVALUATION_EPISODES[True]
        value, normalised = evaluation["value"], evaluation["normalised_value"]
        assert value["low"] < value["mean"] < value["high"]
        span = policies["belief_optimal"]["value"] - PASSIVE_VALUE
        assert normalised["mean"] == pytest.approx((value["mean"] - PASSIVE_VALUE) / span)
    training = scores["training"]
    assert training["normalised_return"][-1] == pytest.approx(
        (training["return"][-1] - PASSIVE_RETURN) / (policies["belief_optimal"]["episode_return"] - PASSIVE_RETURN)
    )
    assert (run.artifacts_dir / control_scores.FIGURE_FILE).stat().st_size > 0
    assert set(run.summary["outcome"]["scores"]["normalised_value"]) == {"sampled", "greedy"}
