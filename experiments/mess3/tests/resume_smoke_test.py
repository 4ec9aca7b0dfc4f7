"""Slow: a Mess3 smoke run stopped by Ctrl-C (SIGINT) after scoring, while it probes, resumes to completion:
the resumed run trains nothing and scores and probes the checkpoints it carries over from its parent (about
2 minutes: two runs with Ray)."""

import os
import signal
import subprocess
import sys
import time

from experiments.mess3.task import belief_geometry, control_scores
from rl.harness import RunLayout
from rl.harness.run import records
from rl.harness.run.manifest import read_manifest

RECIPE = "experiments.mess3.reward_only"


def _command(tmp_path, *args):
    return [
        sys.executable,
        "-m",
        "rl.harness.commands.cli",
        RECIPE,
        "--smoke",
        "--results-dir",
        str(tmp_path / "results"),
        "--artifacts-dir",
        str(tmp_path / "artifacts"),
        *args,
    ]


def _environment(tmp_path):
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)}


def test_a_smoke_run_interrupted_while_probing_resumes_to_its_probes_without_training_again(tmp_path):
    parent = RunLayout(tmp_path / "results", tmp_path / "artifacts", "parent", smoke=True)
    process = subprocess.Popen(
        _command(tmp_path, "--run-id", "parent"),
        env=_environment(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 400
        while not (parent.results_dir / control_scores.SCORES_FILE).is_file():  # scored: probing runs next
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()[-3000:]
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert process.returncode == 130, stderr[-3000:]
    stopped = read_manifest(parent.results_dir)
    assert stopped.status == "interrupted" and not (parent.results_dir / belief_geometry.COMPARISON_FILE).exists()

    done = subprocess.run(
        _command(tmp_path, "--run-id", "child", "--resume-from", "parent"),
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    child = RunLayout(tmp_path / "results", tmp_path / "artifacts", "child", smoke=True)
    manifest = read_manifest(child.results_dir)
    assert manifest.status == "completed"
    assert records.read_json_lines(str(child.artifacts_dir / records.METRICS_FILE)) == []  # nothing trained again
    assert [entry.iteration for entry in manifest.checkpoints] == [entry.iteration for entry in stopped.checkpoints]
    assert [entry.iteration for entry in manifest.checkpoints] == [0, 1, 2, 3]
    assert (child.results_dir / belief_geometry.COMPARISON_FILE).is_file()
    for stage in (
        "scoring iter_000003 (sampled actions): ",
        "scoring iter_000003 (greedy actions): ",
        "probing 4 checkpoint(s) of child [",
        "4/4",
    ):  # each long stage says where it is
        assert stage in done.stderr, stage
    outcome = records.read_json(str(child.results_dir / records.SUMMARY_FILE), "summary")["outcome"]
    assert outcome["probe_r2"] and outcome["scores"]["final_training_return"] is not None  # the parent's rows
