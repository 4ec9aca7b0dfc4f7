"""A run stopped at any stage resumes to completion: training if any is left, else the stages after it, from the
checkpoints it carries over (tests/staged_recipe.py, real processes stopped by SIGINT and SIGKILL)."""

import json
import signal

import pytest

from rl.harness.commands import cli
from rl.harness.run import records
from rl.harness.run.manifest import read_manifest
from rl.harness.tests import run_helpers, staged_recipe

STAGED = "rl.harness.tests.staged_recipe"
ALL_ROWS = list(range(1, staged_recipe.ITERATIONS + 1))
ALL_CHECKPOINTS = [0, 2, 4]


def _args(tmp_path, run_id, *more):
    return [
        STAGED,
        "--results-dir",
        tmp_path / "results",
        "--artifacts-dir",
        tmp_path / "artifacts",
        "--run-id",
        run_id,
        *more,
    ]


def _stop_in(tmp_path, stage, signal_number):
    """The parent run, stopped by `signal_number` while it is in `stage`; its exit status."""
    process = run_helpers.start_cli(_args(tmp_path, "parent"), STAGED_RECIPE_WAIT_IN=stage)
    try:
        line = process.stdout.readline()
        while line and line.strip() != f"stage {stage}":
            line = process.stdout.readline()
        assert line, f"the run ended before stage {stage}: {process.stderr.read()}"
        process.send_signal(signal_number)
        process.communicate(timeout=60)
    finally:
        run_helpers.stop_group(process)
    return process.returncode


def _run(tmp_path, run_id, *more):
    """The CLI in this process (a resume needs no real signal); its exit status."""
    return cli.main(["rl-harness", *map(str, _args(tmp_path, run_id, *more))])


def _output(tmp_path, run_id, stage):
    return json.loads((tmp_path / "results" / run_id / f"{stage}.json").read_text())


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
@pytest.mark.parametrize("stage", ["training", *staged_recipe.STAGES])
def test_a_run_stopped_in_any_stage_resumes_to_completion_without_training_again(tmp_path, stage, signal_number):
    status = _stop_in(tmp_path, stage, signal_number)
    parent = read_manifest(tmp_path / "results" / "parent")
    if signal_number == signal.SIGINT:
        assert status == 130 and parent.status == "interrupted"
    else:
        assert status == -signal.SIGKILL and parent.effective_status == "crashed"
    parent_rows = [row["training_iteration"] for row in run_helpers.metrics_rows(tmp_path / "artifacts" / "parent")]

    assert _run(tmp_path, "child", "--resume-from", "parent") == 0
    child = read_manifest(tmp_path / "results" / "child")
    assert child.status == "completed"
    own_rows = [
        row["training_iteration"]
        for row in records.read_json_lines(str(tmp_path / "artifacts" / "child" / records.METRICS_FILE))
    ]
    assert own_rows == ALL_ROWS[len(parent_rows) :]  # what training had left, and nothing again
    assert [entry.iteration for entry in child.checkpoints] == ALL_CHECKPOINTS
    for stage_run in staged_recipe.STAGES:  # every stage ran in the child, from the lineage's checkpoints and rows
        seen = _output(tmp_path, "child", stage_run)
        assert seen == {"checkpoints": ALL_CHECKPOINTS, "readable": ALL_CHECKPOINTS, "rows": ALL_ROWS}, stage_run
    assert read_manifest(tmp_path / "results" / "parent").checkpoints == parent.checkpoints  # the parent's untouched


def test_a_carried_checkpoint_is_a_link_and_the_parents_files_stay_whole(tmp_path):
    assert _stop_in(tmp_path, "probing", signal.SIGINT) == 130
    assert _run(tmp_path, "child", "--resume-from", "parent") == 0
    parent_file = tmp_path / "artifacts" / "parent" / "checkpoints" / "iter_000004" / staged_recipe.STATE_FILE
    child_file = tmp_path / "artifacts" / "child" / "checkpoints" / "iter_000004" / staged_recipe.STATE_FILE
    assert parent_file.stat().st_ino == child_file.stat().st_ino and parent_file.read_text() == child_file.read_text()
    state = json.loads((child_file.parent / records.CHECKPOINT_STATE_FILE).read_text())
    assert state["run_id"] == "parent"  # the checkpoint says who saved it


def test_resuming_a_completed_run_says_there_is_nothing_to_do_and_keeps_no_run(tmp_path, capsys):
    assert _run(tmp_path, "parent") == 0
    capsys.readouterr()
    assert _run(tmp_path, "child", "--resume-from", "parent") == 0
    out, _err = capsys.readouterr()
    assert out.strip().splitlines()[-1] == (
        "rl-harness: run parent completed its budget (iteration 4, env steps 400): nothing to resume; raise the"
        " recipe's budget to train it further (run child was not kept)"
    )
    assert not (tmp_path / "results" / "child").exists() and not (tmp_path / "artifacts" / "child").exists()


def test_a_resumed_resume_carries_the_whole_lineage(tmp_path):
    assert _stop_in(tmp_path, "training", signal.SIGKILL) == -signal.SIGKILL
    assert _stop_in_child(tmp_path) == 130
    assert _run(tmp_path, "grandchild", "--resume-from", "child") == 0
    seen = _output(tmp_path, "grandchild", "plotting")
    assert seen == {"checkpoints": ALL_CHECKPOINTS, "readable": ALL_CHECKPOINTS, "rows": ALL_ROWS}


def _stop_in_child(tmp_path):
    """`child`, resumed from `parent`, interrupted while scoring."""
    process = run_helpers.start_cli(
        _args(tmp_path, "child", "--resume-from", "parent"), STAGED_RECIPE_WAIT_IN="scoring"
    )
    try:
        while (line := process.stdout.readline()) and line.strip() != "stage scoring":
            pass
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        run_helpers.stop_group(process)
    return process.returncode
