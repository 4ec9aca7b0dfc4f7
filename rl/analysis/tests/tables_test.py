"""Runs and a study's members as DataFrames, over real runs of the harness's fake recipe (no RLlib)."""

import json
import subprocess
import sys

import pytest

from rl.analysis import tables
from rl.harness import RecordError
from rl.harness.tests import run_helpers

STUDY = "rl.harness.tests.fake_study"


@pytest.fixture
def study(tmp_path, monkeypatch):
    """Study `adopted` of fake_study: agent first at seeds 0 and 1 (runs a0, a1), second at seed 0 (b0, --set)."""
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    for run_id, seed in (("a0", 0), ("a1", 1), ("b0", 0)):
        assert run_helpers.run_fake(results, artifacts, "--run-id", run_id, "--seed", str(seed)) == 0
    assert run_helpers.adopt_study(results, artifacts, STUDY, "adopted", "first=a0,a1", "second=b0") == 0
    return results


def _recorded(results, run_id):
    return (
        json.loads((results / run_id / "run_manifest.json").read_text()),
        json.loads((results / run_id / "summary.json").read_text()),
    )


def test_runs_are_a_dataframe_of_what_each_run_recorded(study):
    frame = tables.runs([str(study)])
    assert list(frame["run_id"]) == ["a0", "a1", "b0"]
    for _, row in frame.iterrows():
        manifest, summary = _recorded(study, row["run_id"])
        assert (row["seed"], row["status"], row["experiment"]) == (
            manifest["seed"],
            "completed",
            manifest["experiment"]["module"],
        )
        assert row["outcome.last_loss"] == summary["outcome"]["last_loss"]
        assert row["final_metrics.fake/loss"] == summary["metrics"]["fake/loss"]["last"]
        assert row["duration_s"] > 0
    assert list(tables.runs([str(study)], status="failed")["run_id"]) == []


def test_a_studys_members_are_a_dataframe_with_their_scores_and_times(study):
    frame = tables.study_members(study, "adopted")
    assert list(zip(frame["agent"], frame["seed"], frame["run_id"])) == [
        ("first", 0, "a0"),
        ("first", 1, "a1"),
        ("second", 0, "b0"),
    ]
    for _, row in frame.iterrows():
        manifest, summary = _recorded(study, row["run_id"])
        assert row["status"] == "completed" and row["started_at"] == manifest["started_at"]
        assert row["last loss"] == summary["outcome"]["last_loss"]
        assert row["iterations"] == summary["outcome"]["iterations"] == 3
    assert frame.pivot(index="seed", columns="agent", values="last loss").shape == (2, 2)
    with pytest.raises(RecordError, match="no study 'missing'"):
        tables.study_members(study, "missing")


def test_the_runs_command_does_not_import_pandas():
    # pandas takes about a second to import; `rl-harness runs` stays fast without it.
    code = "import sys, rl.harness.commands.cli; sys.exit('pandas' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], env=run_helpers.child_env(), timeout=60, check=False).returncode
        == 0
    )
