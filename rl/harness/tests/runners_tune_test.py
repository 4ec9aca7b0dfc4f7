"""Slow: a real Ray Tune run (two seeds of PPO on CartPole-v1), interrupted by SIGTERM and resumed."""

import itertools
import json
import signal

from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

from rl.harness.run import records, seeding, tensorboard_events
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION
from rl.harness.run.status import parse_time
from rl.harness.tests import run_helpers

ITERATIONS = 4  # iterations left after the interrupt for both trials


def test_a_tune_run_streams_metrics_stops_on_sigterm_and_resumes_each_trial(tmp_path):
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    env = {"PPO_RECIPE_RUNNER": "tune", "PPO_RECIPE_ITERATIONS": ITERATIONS}
    status, stderr = run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "first", *roots],
        lambda: run_helpers.metrics_rows(tmp_path / "a" / "first"),
        signal.SIGTERM,
        "the first result",
        **env,
    )
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    first = run_helpers.manifest(tmp_path / "r" / "first")
    seeds = seeding.SeedStreams(42).integers("tune/trials", 2)
    assert (first["status"], first["runner"]["kind"], first["runner"]["trial_seeds"]) == ("interrupted", "tune", seeds)
    assert (tmp_path / "a" / "first" / "tune").is_dir()  # Tune's storage lives in the run's artifacts
    first_rows = run_helpers.metrics_rows(tmp_path / "a" / "first")
    interrupted_trial = first_rows[0]["trial_id"]
    last = max(row["training_iteration"] for row in first_rows if row["trial_id"] == interrupted_trial)
    assert last < ITERATIONS
    # A final checkpoint of each running trial at its last iteration (with local sampling both
    # trials fit the 2 CPUs at once, so either may checkpoint last).
    checkpointed = {}
    for checkpoint in first["checkpoints"]:
        checkpointed[checkpoint["trial_id"]] = max(checkpointed.get(checkpoint["trial_id"], 0), checkpoint["iteration"])
    assert checkpointed[interrupted_trial] == last

    status, _, stderr = run_helpers.run_cli(
        [run_helpers.PPO, "--run-id", "second", "--resume-from", "first", *roots], timeout=300, **env
    )
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
    # Every trial continues from its last checkpoint; one that had none starts from scratch.
    assert len(by_trial) + sum(checkpointed.get(trial["trial_id"], 0) == ITERATIONS for trial in trials) == 2
    for trial_id, rows in by_trial.items():
        start = checkpointed.get(trial_id, 0) + 1
        assert [row["training_iteration"] for row in rows] == list(range(start, ITERATIONS + 1))
    # TensorBoard: a folder per trial, in the first run's folder, the resumed run's rows after the first run's.
    events = tmp_path / "a" / "first" / tensorboard_events.EVENTS_DIR
    assert second["paths"]["tensorboard"] == str(events)
    for trial_id in {row["trial_id"] for row in first_rows}:
        accumulator = EventAccumulator(str(events / trial_id), size_guidance={SCALARS: 0})
        accumulator.Reload()
        rows = [
            row
            for run_id in ("first", "second")
            for row in run_helpers.metrics_rows(tmp_path / "a" / run_id)
            if row["trial_id"] == trial_id
        ]
        assert [(event.step, event.value) for event in accumulator.Scalars(ITERATION)] == [
            (row[ENV_STEPS], row[ITERATION]) for row in rows
        ]
    # Streamed as results arrived: consecutive rows of a trial are apart by about that iteration's
    # training time (written all at once at the end, they would be microseconds apart).
    gaps = [
        (parse_time(later["harness/logged_at"]) - parse_time(earlier["harness/logged_at"]), later["time_this_iter_s"])
        for rows in by_trial.values()
        for earlier, later in itertools.pairwise(rows)
    ]
    assert gaps and all(gap >= 0.5 * iteration_s for gap, iteration_s in gaps), gaps


def test_after_a_stop_no_trial_trains_past_its_checkpoint_while_another_reports_late(tmp_path):
    # Under load one trial's iteration can take far longer than the other's (this flaked the test
    # above): trial A has reported, trial B is in its first iteration and reports 20 s later, and
    # the SIGTERM comes. Before, A was only asked for a checkpoint and trained on until B had one,
    # past its checkpoint and up to its budget. Each trial must stop at its next result, saved there.
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    budget = 10
    env = {
        "PPO_RECIPE_RUNNER": "tune",
        "PPO_RECIPE_ITERATIONS": budget,
        "PPO_RECIPE_LATE_TRIAL_S": 20,
        "PPO_RECIPE_MARKER_DIR": tmp_path,
    }
    seen = []

    def b_is_late():  # A has reported and B waits inside its first iteration
        seen[:] = run_helpers.metrics_rows(tmp_path / "a" / "late")
        return seen and (tmp_path / "late").exists()

    status, stderr = run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "late", *roots], b_is_late, signal.SIGTERM, "a late trial", **env
    )
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    early = seen[0]["trial_id"]
    at_signal = max(row["training_iteration"] for row in seen)
    iterations = {}
    for row in run_helpers.metrics_rows(tmp_path / "a" / "late"):
        iterations.setdefault(row["trial_id"], []).append(row["training_iteration"])
    # A's next result after the signal is its last (one more may have been logged as the signal went out).
    assert iterations[early][-1] <= at_signal + 2 and iterations[early][-1] < budget, (at_signal, iterations)
    assert [done for trial, done in iterations.items() if trial != early] == [[1]], iterations
    last_checkpoint = {}
    for checkpoint in run_helpers.manifest(tmp_path / "r" / "late")["checkpoints"]:
        last_checkpoint[checkpoint["trial_id"]] = checkpoint["iteration"]
    assert last_checkpoint == {trial: done[-1] for trial, done in iterations.items()}  # every last row is saved
