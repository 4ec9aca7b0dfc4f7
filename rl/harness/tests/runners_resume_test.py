"""Slow: a real run stopped by SIGTERM is resumed to completion with continuous counters."""

import signal

from rl.harness.tests import run_helpers

ITERATIONS = 5


def test_sigterm_then_resume_continues_iterations_and_env_steps(tmp_path):
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    status, stderr = run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "first", *roots], lambda: run_helpers.metrics_rows(tmp_path / "a" / "first"),
        signal.SIGTERM, "the first result", PPO_RECIPE_ITERATIONS=ITERATIONS)
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    first = run_helpers.manifest(tmp_path / "r" / "first")
    first_rows = run_helpers.metrics_rows(tmp_path / "a" / "first")
    stopped_at = first_rows[-1]["training_iteration"]
    assert first["status"] == "interrupted" and first["interrupted_by"] == "SIGTERM"
    assert 1 <= stopped_at < ITERATIONS
    assert first["checkpoints"][-1]["iteration"] == stopped_at  # the final checkpoint

    status, _, stderr = run_helpers.run_cli([run_helpers.PPO, "--run-id", "second", "--resume-from", "first", *roots],
                                            timeout=240, PPO_RECIPE_ITERATIONS=ITERATIONS)
    assert status == 0, stderr[-3000:]
    second = run_helpers.manifest(tmp_path / "r" / "second")
    assert second["status"] == "completed"
    assert second["parent_run"]["parent_run_id"] == "first"
    assert second["parent_run"]["iteration"] == stopped_at
    rows = run_helpers.metrics_rows(tmp_path / "a" / "second")
    assert [row["training_iteration"] for row in rows] == list(range(stopped_at + 1, ITERATIONS + 1))
    steps = [row["num_env_steps_sampled_lifetime"] for row in first_rows + rows]
    assert all(later > earlier for earlier, later in zip(steps, steps[1:]))  # continuous, never reset
    assert rows[0]["num_env_steps_sampled_lifetime"] - first_rows[-1]["num_env_steps_sampled_lifetime"] <= 2 * 400
    assert second["checkpoints"][-1]["iteration"] == ITERATIONS
    assert len(run_helpers.metrics_rows(tmp_path / "a" / "first")) == len(first_rows)  # parent untouched
