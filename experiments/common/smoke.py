"""Running an experiment's smoke budget from a test, and reading what it recorded.

    from experiments.common import smoke

    run = smoke.run_smoke("experiments/mess3/reward_only", "experiments.mess3.reward_only", tmp_path)
    run.manifest["status"] == "completed"; run.summary["outcome"]; run.results_dir / "probe_report.json"

    study = smoke.run_study_smoke("experiments/mess3/critic_study", "experiments.mess3.critic_study", tmp_path)
    study.record["members"]; study.summary; study.member_results_dir(run_id)

Under `bazel test` it runs the rl_experiment binary from the test's runfiles (add the target to
the test's `data`), so the build identity is checked too; under plain pytest it runs the recipe
through `python -m rl.harness.commands.cli`. Records go under `tmp_path` (TEST_TMPDIR's), never beside the recipe.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

from rl.harness import RunLayout
from rl.harness.run import records
from rl.harness.study import study_folder

RUN_ID = "smoke-test"


@dataclasses.dataclass(frozen=True)
class SmokeRun:
    results_dir: pathlib.Path
    artifacts_dir: pathlib.Path
    manifest: dict
    summary: dict
    stdout: str
    built_with_bazel: bool

    def metrics(self) -> list[dict]:
        # Strict on purpose: a finished run's metrics must have no torn line (read_json_lines forgives one).
        lines = (self.artifacts_dir / records.METRICS_FILE).read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def _run_binary(
    binary: str, module_command: list[str], tmp_path: pathlib.Path, options: list[str], *, timeout: float
) -> tuple[subprocess.CompletedProcess, bool]:
    """Runs `binary` (a runfiles path) under Bazel, else `python -m rl.harness.commands.cli <module_command>`,
    with `options` and records under tmp_path; asserts exit 0. Returns the process and whether Bazel's binary ran."""
    executable = pathlib.Path(binary)
    under_bazel = "TEST_SRCDIR" in os.environ and executable.exists()
    command = (
        [str(executable.resolve())]
        if under_bazel
        else [sys.executable, "-m", "rl.harness.commands.cli", *module_command]
    )
    command += [*options, "--results-dir", str(tmp_path / "results"), "--artifacts-dir", str(tmp_path / "artifacts")]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "OMP_NUM_THREADS": "1",
        # RLlib's Algorithm logs under ~/ray_results, read-only in Bazel's sandbox.
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=timeout, start_new_session=True, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-6000:]}"
    return done, under_bazel


def run_smoke(
    binary: str, module: str, tmp_path: pathlib.Path, *, timeout: float = 600, options: tuple[str, ...] = ()
) -> SmokeRun:
    """Runs `binary` (runfiles path of the rl_experiment) or else `module` with --smoke and `options`
    (e.g. ("--set", "training/pipelined=true")); asserts it completed."""
    done, under_bazel = _run_binary(
        binary, [module], tmp_path, ["--smoke", "--run-id", RUN_ID, *options], timeout=timeout
    )
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    layout = RunLayout(results, artifacts, RUN_ID, smoke=True)
    results_dir = layout.results_dir
    return SmokeRun(
        results_dir=results_dir,
        artifacts_dir=layout.artifacts_dir,
        manifest=json.loads((results_dir / records.MANIFEST_FILE).read_text()),
        summary=json.loads((results_dir / records.SUMMARY_FILE).read_text()),
        stdout=done.stdout,
        built_with_bazel=under_bazel,
    )


STUDY_ID = "smoke-study"


@dataclasses.dataclass(frozen=True)
class SmokeStudy:
    folder: pathlib.Path  # results/smoke/studies/<study-id>: study.json, summary.json, summary.md, curves.png
    record: dict  # study.json
    summary: dict  # summary.json
    stdout: str
    built_with_bazel: bool
    _results_root: pathlib.Path
    _artifacts_root: pathlib.Path

    def member_results_dir(self, run_id: str) -> pathlib.Path:
        """Where a member's run keeps its results (manifest, summary, probe report)."""
        return RunLayout(self._results_root, self._artifacts_root, run_id, smoke=True).results_dir


def run_study_smoke(binary: str, module: str, tmp_path: pathlib.Path, *, timeout: float = 3000) -> SmokeStudy:
    """Runs the rl_study `binary` (runfiles path) or else `study <module>` with --smoke; asserts it exited 0
    (every member completed)."""
    done, under_bazel = _run_binary(
        binary, ["study", module], tmp_path, ["--smoke", "--study-id", STUDY_ID], timeout=timeout
    )
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    folder = study_folder(results, STUDY_ID, smoke=True)
    return SmokeStudy(
        folder=folder,
        record=json.loads((folder / "study.json").read_text()),
        summary=json.loads((folder / "summary.json").read_text()),
        stdout=done.stdout,
        built_with_bazel=under_bazel,
        _results_root=results,
        _artifacts_root=artifacts,
    )
