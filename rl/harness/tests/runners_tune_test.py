"""Slow: a real Ray Tune run (two seeds of PPO on CartPole-v1), interrupted by SIGTERM and resumed."""

import json
import signal

from rl.harness import records, seeding
from rl.harness.tests import run_helpers

ITERATIONS = 3


def test_a_tune_run_streams_metrics_stops_on_sigterm_and_resumes_each_trial(tmp_path):
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    env = {"PPO_RECIPE_RUNNER": "tune", "PPO_RECIPE_ITERATIONS": ITERATIONS}
    status, stderr = run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "first", *roots], lambda: run_helpers.metrics_rows(tmp_path / "a" / "first"),
        signal.SIGTERM, "the first result", **env)
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    first = run_helpers.manifest(tmp_path / "r" / "first")
    seeds = seeding.SeedStreams(42).integers("tune/trials", 2)
    assert (first["status"], first["runner"]["kind"], first["runner"]["trial_seeds"]) == ("interrupted", "tune", seeds)
    assert (tmp_path / "a" / "first" / "tune").is_dir()  # Tune's storage lives in the run's artifacts
    first_rows = run_helpers.metrics_rows(tmp_path / "a" / "first")
    interrupted_trial = first_rows[0]["trial_id"]
    last = max(row["training_iteration"] for row in first_rows if row["trial_id"] == interrupted_trial)
    assert last < ITERATIONS
    # A final checkpoint of the running trial at its last iteration.
    assert [(c["trial_id"], c["iteration"]) for c in first["checkpoints"]][-1] == (interrupted_trial, last)

    status, _, stderr = run_helpers.run_cli([run_helpers.PPO, "--run-id", "second", "--resume-from", "first", *roots],
                                            timeout=300, **env)
    assert status == 0, stderr[-3000:]
    second = run_helpers.manifest(tmp_path / "r" / "second")
    assert second["status"] == "completed" and second["parent_run"]["parent_run_id"] == "first"
    trials = json.loads((tmp_path / "r" / "second" / records.SUMMARY_FILE).read_text())["trials"]
    assert sorted(trial["seed"] for trial in trials) == sorted(seeds)
    for trial in trials:
        assert (trial["status"], trial["training_iteration"]) == ("finished", ITERATIONS)
        assert (tmp_path / "a" / "second" / trial["checkpoint"]).is_dir()

    by_trial = {}
    for row in run_helpers.metrics_rows(tmp_path / "a" / "second"):
        by_trial.setdefault(row["trial_id"], []).append(row)
    # The interrupted trial continues its counters; the other one starts from scratch.
    assert [row["training_iteration"] for row in by_trial.pop(interrupted_trial)] == list(range(last + 1, ITERATIONS + 1))
    (fresh,) = by_trial.values()
    assert [row["training_iteration"] for row in fresh] == list(range(1, ITERATIONS + 1))
    # Streamed as results arrived: the fresh trial's rows were written over seconds, not at once.
    times = [records.parse_time(row["harness/logged_at"]) for row in fresh]
    assert times[-1] - times[0] > 1
