"""SIGINT/SIGTERM end a run as interrupted with a final checkpoint; SIGKILL leaves a crashed run."""

import re
import signal

import pytest

from rl.harness.run import records
from rl.harness.run.manifest import RunManifest
from rl.harness.tests import run_helpers

FAKE = run_helpers.FAKE
SLOW_FAKE = {"FAKE_RECIPE_ITERATIONS": 1000, "FAKE_RECIPE_SLEEP_S": 0.05}


def _args(tmp_path, run_id):
    return [FAKE, "--run-id", run_id, "--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]


def _rows(tmp_path, run_id):
    return run_helpers.metrics_rows(tmp_path / "a" / run_id)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_interrupts_with_a_final_checkpoint_and_the_run_resumes(tmp_path, signal_number):
    def beating():  # three rows written and the heartbeat seen to advance
        if len(_rows(tmp_path, "first")) < 3:
            return False
        beat = run_helpers.manifest(tmp_path / "r" / "first")["heartbeat"]["at"]
        return run_helpers.wait_for(
            lambda: run_helpers.manifest(tmp_path / "r" / "first")["heartbeat"]["at"] > beat, 10, "a heartbeat"
        )

    status, stderr = run_helpers.run_until(
        _args(tmp_path, "first"),
        beating,
        signal_number,
        "a running run",
        timeout=60,
        RL_HARNESS_HEARTBEAT_S=0.2,
        **SLOW_FAKE,
    )
    assert status == 128 + signal_number, stderr
    manifest = run_helpers.manifest(tmp_path / "r" / "first")
    assert (manifest["status"], manifest["interrupted_by"]) == ("interrupted", signal.Signals(signal_number).name)
    last = _rows(tmp_path, "first")[-1]["training_iteration"]
    assert manifest["checkpoints"][-1]["iteration"] == last  # the final checkpoint is the last iteration
    assert (tmp_path / "a" / "first" / manifest["checkpoints"][-1]["path"]).is_dir()

    status, _, stderr = run_helpers.run_cli(
        [*_args(tmp_path, "second"), "--resume-from", "first"], FAKE_RECIPE_ITERATIONS=last + 2
    )
    assert status == 0, stderr
    rows = _rows(tmp_path, "second")
    assert [row["training_iteration"] for row in rows] == [last + 1, last + 2]
    assert [row["num_env_steps_sampled_lifetime"] for row in rows] == [100 * (last + 1), 100 * (last + 2)]
    assert run_helpers.manifest(tmp_path / "r" / "second")["parent_run"]["parent_run_id"] == "first"


def test_a_killed_run_is_reported_as_crashed_and_keeps_its_records(tmp_path):
    run_helpers.run_until(
        _args(tmp_path, "killed"),
        lambda: len(_rows(tmp_path, "killed")) >= 5,
        signal.SIGKILL,
        "five rows",
        timeout=60,
        **SLOW_FAKE,
    )
    rows = _rows(tmp_path, "killed")
    assert [row["training_iteration"] for row in rows] == list(range(1, len(rows) + 1))
    manifest = run_helpers.manifest(tmp_path / "r" / "killed")
    assert manifest["status"] == "running" and RunManifest.from_dict(manifest).effective_status == "crashed"
    assert manifest["checkpoints"] and all(
        (tmp_path / "a" / "killed" / c["path"] / records.CHECKPOINT_STATE_FILE).exists()
        for c in manifest["checkpoints"]
    )

    status, listing, _ = run_helpers.run_cli(["runs", "--results-dir", tmp_path / "r"])
    assert status == 0 and listing.splitlines()[1].split()[:2] == ["killed", "crashed"]
    status, shown, _ = run_helpers.run_cli(["show", "killed", "--results-dir", tmp_path / "r"])
    assert "crashed: its process" in shown and "--resume-from killed" in shown

    # The next run in the same place reports it, and resuming from it works.
    resumed_from = manifest["checkpoints"][-1]["iteration"]
    status, _, stderr = run_helpers.run_cli(
        [*_args(tmp_path, "next"), "--resume-from", "killed"], FAKE_RECIPE_ITERATIONS=resumed_from + 1
    )
    assert status == 0, stderr
    assert "run killed crashed" in stderr
    printed = re.search(r"resume it with `([^`]+)`", stderr).group(1).split()  # the command, runnable as printed
    assert printed[:4] == ["python", "-m", "rl.harness.commands.cli", run_helpers.FAKE]
    assert printed[4:8] == ["--resume-from", "killed", "--seed", "42"]
    newest = manifest["checkpoints"][-1]
    assert (
        f"resuming from checkpoint {tmp_path / 'a' / 'killed' / newest['path']} (iteration {resumed_from},"
        f" env steps {newest['env_steps']})"
    ) in stderr
    assert _rows(tmp_path, "next")[0]["training_iteration"] == resumed_from + 1
