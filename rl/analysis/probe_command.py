"""Probe a finished run: every checkpoint, per layer, on the distributions its experiment names.

    bazel run //rl/analysis:probe -- <run-id> [--checkpoints all|last] [--seed N]
                                             [--results-dir DIR] [--artifacts-dir DIR] [--module-id ID]
    python -m rl.analysis.probe_command <run-id> ...          # from the repository root

A thin command over `rl.analysis.probing` (the loop, report and figures). The run is found from its
records (rl.harness); the experiment recorded in its manifest must
define, beside `run(context)`, a `probe_plan(smoke)` returning an `rl.analysis.adapters.ProbePlan`
(adapters, sample sizes, probe options: the science stays in the experiment). Written into the
run's results folder (results/<run-id>/) and, figures, its artifacts folder (artifacts/<run-id>/):

    probe_report.json                 (results) per checkpoint and distribution: the full ProbeReport
    probe_r2_<distribution>.png       (artifacts) held-out R^2 per layer across checkpoints (bootstrap bars)
    belief_simplex_<distribution>.png (artifacts) last checkpoint, best layer: true vs predicted (3 states)
    learning_curves.png               (artifacts) from artifacts/<run-id>/metrics.jsonl

(files beside the run's own outputs; its manifest stays as the run finished).

Seeds: by default the probes use the run's own `probe` seed stream (recorded in its manifest), so
they repeat the probes the run made of itself exactly; `--seed N` draws other contexts, episodes and
splits. Under `bazel run`, an experiment whose code is not in this binary (e.g. it imports rl.envs) is
probed by re-running this command from the source tree; the report then records that its
code is not covered by the build hash.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys

import numpy as np

from rl.analysis import probing
from rl.analysis.adapters import ProbePlan
from rl.analysis.checkpoints import RunArtifacts, find_checkpoints
from rl.harness import HarnessError, UsageError, env_vars
from rl.harness.commands import recipes
from rl.harness.run import records
from rl.harness.training import hardware

# Set when the command re-ran itself from the source tree (see the module docstring).
FROM_SOURCE_ENV = "RL_ANALYSIS_PROBE_FROM_SOURCE"


def write_outputs(found: RunArtifacts, outputs: dict[str, object]) -> list[str]:
    """Writes a finished run's probe outputs, each atomically, where a run writes them (`records.output_place`:
    figures into its artifacts folder, reports into its results folder); returns their paths.

    The run's manifest is left as it finished (its outputs are what the run itself wrote).
    """
    folders = {records.RESULTS: found.run.run_dir, records.ARTIFACTS: str(found.artifacts_dir)}
    written = []
    for name, data in outputs.items():
        path = os.path.join(folders[records.output_place(name)], name)
        records.write_data_atomically(path, data)
        written.append(path)
    return written


def load_probe_plan(module_name: str, *, smoke: bool) -> ProbePlan:
    """The recipe's `probe_plan(smoke)` for a run of that budget; under `bazel run`, re-runs from the
    source tree if the recipe is not here."""
    try:
        recipe = recipes.load_recipe(module_name)
    except UsageError:
        workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
        if workspace and not os.environ.get(FROM_SOURCE_ENV):
            _rerun_from_source(workspace, module_name)
        raise
    make_plan = getattr(recipe, "probe_plan", None)
    if not callable(make_plan):
        raise UsageError(
            f"{module_name} defines no probe_plan(); add `def probe_plan(smoke: bool) -> rl.analysis.adapters.ProbePlan` "
            "beside run(context) (see rl/analysis/probes/README.md)"
        )
    try:
        plan = make_plan(smoke=smoke)
    except TypeError as error:
        raise UsageError(
            f"{module_name}.probe_plan could not be called as probe_plan(smoke={smoke}) ({error}):"
            " it takes whether the run was a smoke run; define `def probe_plan(smoke: bool)`"
        ) from None
    if not isinstance(plan, ProbePlan):
        raise UsageError(f"{module_name}.probe_plan() returned {type(plan).__name__}, not a ProbePlan")
    return plan


def _rerun_from_source(workspace: str, module_name: str) -> None:
    print(
        f"{module_name} is not part of this binary; probing with the source tree {workspace} "
        "(the experiment's code is not covered by the build hash)",
        file=sys.stderr,
    )
    search_path = os.pathsep.join(filter(None, [workspace, os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": search_path, FROM_SOURCE_ENV: "1"}
    for name in (env_vars.BUILD_INFO_ENV, env_vars.BUILD_STAMP_ENV):
        environment.pop(name, None)  # this binary's build identity does not describe the source tree
    # The source tree first and -P (no script folder on sys.path): every rl package comes from it.
    os.execve(sys.executable, [sys.executable, "-P", "-m", "rl.analysis.probe_command", *sys.argv[1:]], environment)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--checkpoints", choices=("all", "last"), default="all")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="entropy of the probe's seed sequence (default: the run's own probe stream, which"
        " repeats its in-run probes; recorded)",
    )
    parser.add_argument("--results-dir", help="where to look for results/<run-id> (default: the workspace)")
    parser.add_argument("--artifacts-dir", help="an artifacts root holding <run-id>/ if not where recorded")
    parser.add_argument("--module-id", default="default_policy", help="the RLModule to probe in each checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    # `bazel run` starts binaries in their runfiles: relative paths mean the caller's folder.
    caller = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())
    results_dir, artifacts_dir = (
        os.path.join(caller, path) if path else None for path in (options.results_dir, options.artifacts_dir)
    )
    roots = [results_dir or os.environ.get("BUILD_WORKSPACE_DIRECTORY") or caller]
    try:
        found = find_checkpoints(options.run_id, roots=roots, artifacts_root=artifacts_dir)
        plan = load_probe_plan(found.run.manifest.experiment.module or "", smoke=found.run.manifest.smoke)
        seed = (
            probing.recorded_probe_seed(found.run.manifest)
            if options.seed is None
            else np.random.SeedSequence(options.seed)
        )
    except HarnessError as error:
        print(f"probe: error: {error}", file=sys.stderr)
        return error.exit_status
    # Probing runs on the CPU, one torch thread per process (as every harness binary).
    hardware.apply_process_settings(hardware.choose_profile("cpu", hardware.detect_machine()))
    if options.checkpoints == "last":
        found = dataclasses.replace(found, checkpoints=found.checkpoints[-1:])
    stopped_by = {}

    def stop(number, frame):  # SIGTERM as Ctrl-C: end at once, before any file is written
        stopped_by["signal"] = number
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        results = probing.probe_checkpoints(
            found, plan, seed=seed, module_id=options.module_id, show_progress=not options.no_progress
        )
        outputs = probing.probe_outputs(
            found, results, seed, rows=probing.metrics_rows(found), from_source=bool(os.environ.get(FROM_SOURCE_ENV))
        )
    except KeyboardInterrupt:
        number = stopped_by.get("signal", signal.SIGINT)
        print(
            f"probe: {signal.Signals(number).name}: stopped before writing anything; run {options.run_id} is as it"
            " was; probe it again to finish",
            file=sys.stderr,
        )
        return 128 + number
    for path in write_outputs(found, outputs):  # each file atomically: a signal here leaves whole files only
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
