"""Slow: each agent recipe's `--smoke` trains one run in its process and records its figures and curve."""

import pytest

from experiments.common import smoke
from experiments.ppo_vs_ppg.task import tasks
from rl.harness.run.metric_keys import ENV_STEPS, RETURN

# PPG's CPU buffer per CartPole env step: obs (4 float32) + loss mask (1 bool) + value target (1 float32).
CARTPOLE_BUFFER_BYTES_PER_STEP = 4 * 4 + 1 + 4
RECIPES = {
    "cartpole_ppo": ("CartPole-v1", "PPO"),
    "cartpole_ppg": ("CartPole-v1", "PPG"),
    "mess3_ppo": ("Mess3Control", "PPO"),
    "mess3_ppg": ("Mess3Control", "PPG"),
}


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_a_smoke_run_records_its_curve_figures_and_references(recipe, tmp_path):
    run = smoke.run_smoke(f"experiments/ppo_vs_ppg/{recipe}", f"experiments.ppo_vs_ppg.{recipe}", tmp_path)

    assert run.manifest["status"] == "completed"
    if run.built_with_bazel:
        assert run.manifest["build"]["target"] == f"//experiments/ppo_vs_ppg:{recipe}"
    assert run.manifest["runner"]["kind"] == "in_process"
    task, algorithm = RECIPES[recipe]
    outcome = run.summary["outcome"]
    assert (outcome["task"], outcome["algorithm"]) == (task, algorithm)
    assert outcome["env_steps"] >= tasks.TASKS[task].env_steps[True]
    assert outcome["settings"] == tasks.settings_of(task, algorithm, smoke=True)
    rows = run.metrics()
    assert [row[ENV_STEPS] for row in rows] == sorted({row[ENV_STEPS] for row in rows})  # one row per update
    curve = [[row[ENV_STEPS], row[RETURN]] for row in rows if row[RETURN] is not None]
    assert outcome["final_return"] == pytest.approx(curve[-1][1], abs=1e-4)
    assert outcome["peak_rss_mib"] >= outcome["built_rss_mib"] > 0 and outcome["policy_update_peak_rise_mib"] >= 0
    expected_references = {
        "CartPole-v1": {"uniform random", "ceiling"},
        "Mess3Control": {
            "passive",
            "always tilt to state 0",
            "uniform random",
            "best memoryless (exact)",
            "belief-optimal (exact)",
        },
    }[task]
    assert set(outcome["references"]) == expected_references
    # The exact references put the Mess3 runs on a 0-1 scale; CartPole has none.
    assert ("normalised_final_return" in outcome) == (task == "Mess3Control")
    if algorithm == "PPG":
        assert outcome["aux_phases"] >= 1 and outcome["aux_update_peak_rise_mib"] >= 0  # smoke: a phase every 2
        if task == "CartPole-v1":
            assert outcome["aux_buffer_bytes_per_env_step"] == CARTPOLE_BUFFER_BYTES_PER_STEP
    else:
        assert "aux_phases" not in outcome
