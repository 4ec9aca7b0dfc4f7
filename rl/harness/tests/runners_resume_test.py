"""Slow: a real run stopped by SIGTERM is resumed to completion with continuous counters; a damaged checkpoint is
one line."""

import itertools
import re
import signal

from rl.harness.tests import run_helpers

ITERATIONS = 5


def test_sigterm_then_resume_continues_iterations_and_env_steps(tmp_path):
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    status, stderr = run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "first", *roots],
        lambda: run_helpers.metrics_rows(tmp_path / "a" / "first"),
        signal.SIGTERM,
        "the first result",
        PPO_RECIPE_ITERATIONS=ITERATIONS,
    )
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    first = run_helpers.manifest(tmp_path / "r" / "first")
    first_rows = run_helpers.metrics_rows(tmp_path / "a" / "first")
    stopped_at = first_rows[-1]["training_iteration"]
    assert first["status"] == "interrupted" and first["interrupted_by"] == "SIGTERM"
    assert 1 <= stopped_at < ITERATIONS
    assert first["checkpoints"][-1]["iteration"] == stopped_at  # the final checkpoint

    status, _, stderr = run_helpers.run_cli(
        [run_helpers.PPO, "--run-id", "second", "--resume-from", "first", *roots],
        timeout=240,
        PPO_RECIPE_ITERATIONS=ITERATIONS,
    )
    assert status == 0, stderr[-3000:]
    second = run_helpers.manifest(tmp_path / "r" / "second")
    assert second["status"] == "completed"
    assert second["parent_run"]["parent_run_id"] == "first"
    assert second["parent_run"]["iteration"] == stopped_at
    rows = run_helpers.metrics_rows(tmp_path / "a" / "second")
    assert [row["training_iteration"] for row in rows] == list(range(stopped_at + 1, ITERATIONS + 1))
    steps = [row["num_env_steps_sampled_lifetime"] for row in first_rows + rows]
    assert all(later > earlier for earlier, later in itertools.pairwise(steps))  # continuous, never reset
    assert rows[0]["num_env_steps_sampled_lifetime"] - first_rows[-1]["num_env_steps_sampled_lifetime"] <= 2 * 400
    assert second["checkpoints"][-1]["iteration"] == ITERATIONS
    assert len(run_helpers.metrics_rows(tmp_path / "a" / "first")) == len(first_rows)  # parent untouched


def test_a_damaged_checkpoint_is_refused_before_the_run_or_fails_it_in_one_line(tmp_path):
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    status, _, stderr = run_helpers.run_cli(
        [run_helpers.PPO, "--run-id", "first", *roots], timeout=240, PPO_RECIPE_ITERATIONS=2
    )
    assert status == 0, stderr[-3000:]
    learner_state = tmp_path / "a" / "first" / "checkpoints" / "iter_000002" / "learner_group" / "learner" / "state.pkl"
    whole = learner_state.read_bytes()

    # A whole pickle that names a module nobody has: only restoring it finds that out, mid-run.
    learner_state.write_bytes(b"cno_such_module\nLearnerState\n(tR.")
    status, _, stderr = run_helpers.run_cli(
        [run_helpers.PPO, "--run-id", "second", "--resume-from", "first", *roots], timeout=240, PPO_RECIPE_ITERATIONS=4
    )
    assert status == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert re.search(
        r"run second failed: checkpoint \S+iter_000002 could not be restored \(\w+(: [^\n]*)?\);"
        r" pass --resume-from an earlier checkpoint folder of that run",
        stderr,
    ), stderr[-3000:]
    second = run_helpers.manifest(tmp_path / "r" / "second")
    assert second["status"] == "failed" and second["error"]["type"] == "RestoreFailed"
    assert (tmp_path / "a" / "second" / "traceback.txt").is_file()

    # Cut short: refused before any record, in one line.
    learner_state.write_bytes(whole[: len(whole) // 2])
    status, _, stderr = run_helpers.run_cli(
        [run_helpers.PPO, "--run-id", "third", "--resume-from", "first", *roots], timeout=240, PPO_RECIPE_ITERATIONS=4
    )
    assert status == 2 and "Traceback" not in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"rl-harness: error: checkpoint {learner_state.parents[2]} cannot be read: learner_group/learner/state.pkl is"
            " damaged ("
        )
    )
    assert not (tmp_path / "r" / "third").exists()
