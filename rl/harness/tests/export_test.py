"""`rl-harness export --to mlflow`: runs and a study written with MLflow's client and read back with MLflow.

MLflow lives in the test tools' venv (requirements_test_lock.txt, `@rl_python//:test_tools_python.txt`
named by $RL_TEST_TOOLS_PYTHON_FILE), never in the harness's: the export runs its client there
(`--python`), and a second process of that venv reads the store with `mlflow.search_runs` (slow:
MLflow's start-up and its store's migrations). The expected values come from the runs' own files
(manifest.json, metrics.jsonl, summary.json), not from the export's code.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rl.harness.commands import cli
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import records
from rl.harness.tests import run_helpers, s3_server

STUDY = "rl.harness.tests.fake_study"
READ_BACK = textwrap.dedent("""
    import json, sys
    import mlflow
    from mlflow.tracking import MlflowClient

    uri, experiment = sys.argv[1], sys.argv[2]
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    found = {}
    for run in mlflow.search_runs(experiment_names=[experiment], output_format="list"):
        found[run.info.run_name] = {
            "status": run.info.status, "start": run.info.start_time, "end": run.info.end_time,
            "params": run.data.params, "tags": run.data.tags,
            "history": {key: [[m.step, m.value] for m in client.get_metric_history(run.info.run_id, key)]
                        for key in run.data.metrics}}
    print(json.dumps(found))
""")

PART_WRITTEN = textwrap.dedent("""
    import sys
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sys.argv[1])
    experiment = client.create_experiment("s1")
    run = client.create_run(experiment, tags={"rl_harness.run_id": "a0"}, run_name="a0")
    client.log_metric(run.info.run_id, "fake/loss", 99.0, step=1)
""")


@pytest.fixture
def roots(tmp_path):
    return tmp_path / "results", tmp_path / "artifacts"


def _run(roots, run_id, *flags):
    assert run_helpers.run_fake(*roots, "--run-id", run_id, *flags) == 0


def _export(roots, identifier, *flags):
    results, artifacts = roots
    return cli.main(
        [
            "rl-harness",
            "export",
            "--to",
            "mlflow",
            identifier,
            "--results-dir",
            str(results),
            "--artifacts-dir",
            str(artifacts),
            *flags,
        ]
    )


def test_a_python_without_mlflow_is_refused_in_one_line_naming_the_install(roots, tmp_path, capsys):
    if importlib.util.find_spec("mlflow") is not None:
        pytest.skip("this python has MLflow: the harness's venv must not")
    _run(roots, "r1")
    assert _export(roots, "r1") == EXIT_USAGE  # this python, which has none
    assert (
        "needs a python with MLflow" in (line := run_helpers.one_error_line(capsys))
        and "pip install mlflow-skinny" in line
    )
    assert (
        _export(roots, "r1", "--python", sys.executable, "--tracking-uri", f"sqlite:///{tmp_path}/m.db") == EXIT_USAGE
    )
    assert (
        "this python has no MLflow" in (line := run_helpers.one_error_line(capsys))
        and "pip install mlflow-skinny" in line
    )


def test_a_run_whose_metrics_are_not_here_is_refused_in_one_line(roots, tmp_path, capsys):
    _run(roots, "r1")
    os.remove(roots[1] / "r1" / records.METRICS_FILE)
    assert _export(roots, "r1", "--python", sys.executable) == EXIT_USAGE
    assert (
        "metrics of run r1 are not on this machine" in (line := run_helpers.one_error_line(capsys))
        and "fetch r1" in line
    )


def _read_back(python, uri, experiment):
    done = subprocess.run(
        [python, "-c", READ_BACK, uri, experiment], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _expected_history(roots, run_ids, key):
    rows = [row for run_id in run_ids for row in records.read_json_lines(str(roots[1] / run_id / records.METRICS_FILE))]
    return [[row["training_iteration"], row[key]] for row in rows if key in row]


def _milliseconds(stamp):
    from datetime import datetime

    return round(datetime.fromisoformat(stamp).timestamp() * 1000)


@pytest.mark.slow
def test_a_run_and_a_study_read_back_with_mlflow_as_recorded(roots, tmp_path, capfd, monkeypatch):
    python = s3_server.tools_python()
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    (tmp_path / "store").mkdir()
    _run(roots, "r1", "--seed", "3", "--set", "fake/loss_scale=2.5")
    assert _export(roots, "r1", "--python", python, "--tracking-uri", uri) == 0
    assert _export(roots, "r1", "--python", python, "--tracking-uri", uri) == 0  # again: nothing added
    assert "in the experiment already" in capfd.readouterr().out  # MLflow's client prints it, in its process

    found = _read_back(python, uri, run_helpers.FAKE)
    assert list(found) == ["r1"]
    exported, manifest = found["r1"], records.read_json(str(roots[0] / "r1" / records.MANIFEST_FILE), "manifest")
    recorded = {
        "commit": manifest["code"]["library"]["commit"],
        "dirty": manifest["code"]["library"]["dirty"],
        "build_hash": manifest["build"]["build_hash"],
        "lock_sha256": manifest["build"]["lock_sha256"],
    }
    assert exported["params"] == {
        "fake/loss_scale": "2.5",
        "seed": "3",
        "smoke": "false",
        **{
            key: {True: "true", False: "false"}.get(value, value)
            for key, value in recorded.items()
            if value is not None
        },
    }
    assert {key: exported["tags"][key] for key in ("rl_harness.run_id", "rl_harness.recipe", "rl_harness.status")} == {
        "rl_harness.run_id": "r1",
        "rl_harness.recipe": run_helpers.FAKE,
        "rl_harness.status": "completed",
    }
    assert exported["status"] == "FINISHED"
    assert (exported["start"], exported["end"]) == (
        _milliseconds(manifest["started_at"]),
        _milliseconds(manifest["ended_at"]),
    )
    loss = _expected_history(roots, ["r1"], "fake/loss")
    assert len(loss) == 3 and exported["history"]["fake/loss"] == loss  # float64 both ways: exact
    outcome = records.read_json(str(roots[0] / "r1" / records.SUMMARY_FILE), "summary")["outcome"]
    assert exported["history"]["outcome/last_loss"] == [[3, outcome["last_loss"]]]
    assert outcome["last_loss"] == loss[-1][1]

    # a study of four finished runs: one experiment named by its id, one MLflow run per member
    for agent in ("a", "b"):
        for seed in (0, 1):
            _run(roots, f"{agent}{seed}", "--seed", str(seed))
    results, artifacts = roots
    assert run_helpers.adopt_study(results, artifacts, STUDY, "s1", "first=a0,a1", "second=b0,b1") == 0
    # what a killed export leaves: a0's MLflow run created, its metrics not all written (no `exported` tag)
    subprocess.run([python, "-c", PART_WRITTEN, uri], check=True, capture_output=True, timeout=300)
    assert _export(roots, "s1", "--python", python, "--tracking-uri", uri) == 0
    members = _read_back(python, uri, "s1")
    assert sorted(members) == ["a0", "a1", "b0", "b1"]
    for run_id, member in members.items():
        agent = {"a": "first", "b": "second"}[run_id[0]]
        assert (member["params"]["agent"], member["params"]["seed"]) == (agent, run_id[1])
        assert {key: member["tags"][key] for key in ("rl_harness.study_id", "rl_harness.agent")} == {
            "rl_harness.study_id": "s1",
            "rl_harness.agent": agent,
        }
        outcome = records.read_json(str(roots[0] / run_id / records.SUMMARY_FILE), "summary")["outcome"]
        assert member["history"]["score/last loss"][0][1] == outcome["last_loss"]
        assert member["history"]["score/iterations"][0][1] == outcome["iterations"] == 3
        assert member["history"]["fake/loss"] == _expected_history(roots, [run_id], "fake/loss")  # a0's 99.0 gone
        assert member["tags"]["rl_harness.exported"] == "true"
