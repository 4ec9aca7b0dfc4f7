"""Slow: probing a run trained through the harness (Ray), and probing from the source tree (two processes)."""

import json
import pathlib
import subprocess
import sys

import rl
from rl.analysis import probe_command
from rl.analysis.probes import PROCESS_ROLLOUTS, UNIFORM_CONTEXTS
from rl.analysis.tests.fake_runs import fake_run
from rl.analysis.tests.tiny_modules import tiny_transformer
from rl.harness.tests import run_helpers


def test_probe_a_real_harness_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # RLlib's Algorithm logs under ~/ray_results (read-only in Bazel)
    results_root, artifacts_root = tmp_path / "results", tmp_path / "artifacts"
    status, _, stderr = run_helpers.run_cli(
        [
            "rl.analysis.tests.probe_recipe",
            "--run-id",
            "e2e",
            "--seed",
            "3",
            "--results-dir",
            results_root,
            "--artifacts-dir",
            artifacts_root,
        ],
        timeout=400,
    )
    assert status == 0, stderr[-3000:]
    assert probe_command.main(["e2e", "--results-dir", str(results_root), "--no-progress"]) == 0
    record = json.loads((results_root / "e2e" / "probe_report.json").read_text())
    assert [(c["name"], c["iteration"]) for c in record["checkpoints"]] == [("iter_000001", 1), ("iter_000002", 2)]
    for checkpoint in record["checkpoints"]:
        for kind in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS):
            layers = checkpoint["reports"][kind]["layers"]
            assert [layer["layer"] for layer in layers] == ["residual_0", "residual_1", "residual_2"]
            assert all(0.0 < layer["test"]["r2"] <= 1.0 for layer in layers)
    for name in ("learning_curves.png", "probe_r2_uniform_contexts.png", "belief_simplex_process_rollouts.png"):
        assert (artifacts_root / "e2e" / name).is_file() and not (results_root / "e2e" / name).exists()


def test_an_experiment_outside_the_binary_is_probed_from_the_source_tree(tmp_path):
    """As under `bazel run //rl/analysis:probe`: the binary's rl package lacks a module the experiment
    imports (there: rl.envs), so the command re-runs itself with the workspace's rl package."""
    workspace = tmp_path / "workspace"
    (workspace / "rl").mkdir(parents=True)
    for entry in pathlib.Path(rl.__file__).parent.iterdir():
        (workspace / "rl" / entry.name).symlink_to(entry)
    (workspace / "rl" / "workspace_only").mkdir()
    (workspace / "rl" / "workspace_only" / "__init__.py").touch()
    (workspace / "exp").mkdir()
    (workspace / "exp" / "__init__.py").touch()
    (workspace / "exp" / "recipe.py").write_text(
        "import rl.workspace_only\nfrom rl.analysis.tests.probe_recipe import probe_plan, run\n"
    )
    run_id = fake_run(workspace / "exp", [tiny_transformer(0)], experiment="exp.recipe")
    environment = {
        **run_helpers.child_env(),
        "BUILD_WORKSPACE_DIRECTORY": str(workspace),
        "BUILD_WORKING_DIRECTORY": str(workspace),
    }
    done = subprocess.run(
        [sys.executable, "-m", "rl.analysis.probe_command", run_id, "--no-progress"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not part of this binary; probing with the source tree" in done.stderr
    record = json.loads((workspace / "exp" / "results" / run_id / "probe_report.json").read_text())
    assert record["experiment_code_from_source_tree"] is True
    assert record["build"]["built_with_bazel"] is False  # this binary's build hash does not cover it
