"""Slow: SIGINT/SIGTERM in each phase of a real direct run ends it `interrupted` with exit 130/143.

tests/signal_in_phase.py sends the signal from inside the phase's own call (ray.init, build_algo,
train, save_to_path, ...). The upload phase is in b2_mirror_test (no Ray needed).
"""

import signal

import pytest

from rl.harness.run.status import INTERRUPTED
from rl.harness.tests import run_helpers

# phase -> (iterations logged, checkpoints saved)
PHASES = {
    "start-up": ([], []),
    "ray.init": ([], []),
    "building the algorithm": ([], []),
    "training": ([1], [1]),  # that iteration finishes, then the final checkpoint
    # The first save is the schedule's at iteration 2 (no rolling one: the run trains for less than the
    # rolling saves' cost cap waits); it completes, and the run ends there.
    "checkpointing": ([1, 2], [2]),
    "after training": ([1, 2, 3, 4], [2, 4]),  # trained to the end; the signal meets the stages after Ray
}


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("phase", list(PHASES))
def test_a_signal_in_each_phase_ends_the_run_interrupted(tmp_path, phase, signal_number):
    iterations, checkpoints = PHASES[phase]
    name = signal.Signals(signal_number).name
    status, _, stderr = run_helpers.run_cli(
        [
            phase,
            name,
            run_helpers.PPO,
            "--run-id",
            "run",
            "--results-dir",
            tmp_path / "r",
            "--artifacts-dir",
            tmp_path / "a",
        ],
        timeout=180,
        module="rl.harness.tests.signal_in_phase",
        PPO_RECIPE_ITERATIONS=4,
    )
    manifest = run_helpers.manifest(tmp_path / "r" / "run")
    assert (status, manifest["exit_code"]) == (128 + signal_number, 128 + signal_number), stderr[-3000:]
    assert (manifest["status"], manifest["interrupted_by"], manifest["error"]) == (INTERRUPTED, name, None)
    assert [row["training_iteration"] for row in run_helpers.metrics_rows(tmp_path / "a")] == iterations
    assert [checkpoint["iteration"] for checkpoint in manifest["checkpoints"]] == checkpoints
    assert manifest["rolling_checkpoints"] == []  # none outlives a final checkpoint
    for checkpoint in manifest["checkpoints"]:
        assert (tmp_path / "a" / "run" / checkpoint["path"] / "rllib_checkpoint.json").exists()
