"""Probe a finished run: every checkpoint, per layer, on the distributions its experiment names.

    bazel run //rl/analysis:probe -- <run-id> [--checkpoints all|last] [--seed N]
                                             [--results-dir DIR] [--artifacts-dir DIR] [--module-id ID]
    python -m rl.analysis.probe_command <run-id> ...          # from the repository root

The run is found from its records (rl.harness); the experiment recorded in its manifest must
define, beside `run(context)`, a `probe_plan(smoke)` returning an `rl.analysis.adapters.ProbePlan`
(adapters, sample sizes, probe options: the science stays in the experiment). Written into the
run's results folder (results/<run-id>/):

    probe_report.json                 per checkpoint and distribution: the full ProbeReport
    probe_r2_<distribution>.png       held-out R^2 per layer across checkpoints (bootstrap bars)
    belief_simplex_<distribution>.png last checkpoint, best layer: true vs predicted (3 states)
    learning_curves.png               from artifacts/<run-id>/metrics.jsonl

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
import sys
from typing import Optional

import numpy as np

from rl.analysis.adapters import ProbePlan
from rl.analysis.checkpoints import RunArtifacts, RunCheckpoint, find_checkpoints, load_rl_module
from rl.analysis.modules import AnalysisView
from rl.analysis.plots import belief_simplex_figure, learning_curves_figure, probe_r2_figure, save_figure
from rl.analysis.probes import ProbeDataset, ProbeReport, probe_layers
from rl.analysis.rollouts import collect_rollouts, context_dataset
from rl.analysis.seeds import child_stream
from rl.harness import settings
from rl.harness.commands import recipes
from rl.harness.run import buildinfo, metric_keys, records, seeding, session
from rl.harness.run.status import utc_now
from rl.harness.training import hardware
from rl.harness.errors import HarnessError, UsageError
from rl.harness.run.manifest import RunManifest

REPORT_FILE = "probe_report.json"
PROBE_STREAM = "probe"  # the run's seed stream its probes draw from, in-run and here
PROBE_USES = ("contexts", "rollouts", "rollout_probes")
SCHEMA_VERSION = 1
# Set when the command re-ran itself from the source tree (see the module docstring).
FROM_SOURCE_ENV = "RL_ANALYSIS_PROBE_FROM_SOURCE"


@dataclasses.dataclass(frozen=True)
class CheckpointProbes:
    checkpoint: RunCheckpoint
    reports: dict[str, ProbeReport]  # distribution kind -> report
    datasets: dict[str, ProbeDataset]  # kept for the plots


def probe_seed(streams: seeding.SeedStreams) -> np.random.SeedSequence:
    """The seed sequence a run's probes use, from its streams (what recipes pass in-run)."""
    return np.random.SeedSequence(streams.integer(PROBE_STREAM))


def recorded_probe_seed(manifest: RunManifest) -> np.random.SeedSequence:
    """The seed sequence the run's own probes used: its recorded `probe` stream, else that stream of its root seed.

    So `probe <run-id>` repeats an in-run probe exactly (the same contexts, episodes and splits).
    """
    recorded = manifest.seed_streams.get(PROBE_STREAM) or {}
    if "value" in recorded:
        return np.random.SeedSequence(recorded["value"])
    if not isinstance(manifest.seed, int):
        raise records.RecordError(f"run {manifest.run_id} recorded no root seed; pass --seed N")
    return probe_seed(seeding.SeedStreams(manifest.seed))


def _uses(seed: np.random.SeedSequence) -> dict[str, np.random.SeedSequence]:
    return {name: child_stream(seed, f"probe/{name}") for name in PROBE_USES}


def probe_checkpoints(
    found: RunArtifacts, plan: ProbePlan, *, seed: np.random.SeedSequence, module_id: str, show_progress: bool = True
) -> list[CheckpointProbes]:
    """Probes each checkpoint of `found`. Every checkpoint meets the same contexts, episode seeds,
    splits and resamples (one child of `seed` per use), so differences between checkpoints are paired."""
    streams = _uses(seed)
    results = []
    for checkpoint in found.checkpoints:
        module = load_rl_module(checkpoint.path, module_id)
        provenance = {"run_id": found.run.run_id, "checkpoint": checkpoint.name, "iteration": checkpoint.iteration,
                      "env_steps": checkpoint.env_steps}
        datasets, reports = {}, {}
        if plan.contexts:
            dataset = context_dataset(AnalysisView(module), plan.contexts.adapter,
                                      max_length=plan.contexts.max_length,
                                      group_prefix_length=plan.contexts.group_prefix_length,
                                      batch_size=plan.contexts.batch_size, show_progress=show_progress)
            datasets[dataset.distribution.kind] = dataset
            reports[dataset.distribution.kind] = probe_layers(dataset, seed=streams["contexts"],
                                                              options=plan.options, provenance=provenance)
        if plan.rollouts:
            rollouts = collect_rollouts(module, plan.rollouts.adapter, num_episodes=plan.rollouts.num_episodes,
                                        max_steps=plan.rollouts.max_steps, seed=streams["rollouts"],
                                        batch_size=plan.rollouts.batch_size, stochastic=plan.rollouts.stochastic,
                                        policy=f"run {found.run.run_id} {checkpoint.name}",
                                        show_progress=show_progress)
            dataset = rollouts.probe_dataset(plan.rollouts.target)
            datasets[dataset.distribution.kind] = dataset
            reports[dataset.distribution.kind] = probe_layers(dataset, seed=streams["rollout_probes"],
                                                              options=plan.options, provenance=provenance)
        results.append(CheckpointProbes(checkpoint, reports, datasets))
        for kind, report in reports.items():
            best = max(report.layers, key=lambda layer: layer.test.r2)
            low, high = best.bootstrap["r2"]
            print(f"{checkpoint.name} {kind}: best {best.layer} R^2 {best.test.r2:.4f} [{low:.4f}, {high:.4f}]"
                  f" (baseline {best.baseline.r2:.4f}, shuffled {best.shuffle_control.r2:.4f},"
                  f" null p {best.permutation_null['p_value']:.3g})")
    return results


def _seed_record(seed: np.random.SeedSequence) -> dict:
    """How a report records its seed: the parent's entropy (and spawn key, if any) and each use's child."""
    record = {"seed": int(seed.entropy)}
    if seed.spawn_key:
        record["seed_spawn_key"] = [int(word) for word in seed.spawn_key]
    record["seed_streams"] = {f"probe/{name}": {"kind": "sequence", "spawn_key": [int(w) for w in child.spawn_key]}
                              for name, child in _uses(seed).items()}
    return record


def write_outputs(found: RunArtifacts, results: list[CheckpointProbes], seed: np.random.SeedSequence,
                  *, from_source: bool) -> list[str]:
    """Writes probe_report.json and the PNGs into the run's results folder; returns their paths."""
    folder = found.run.run_dir
    written = [os.path.join(folder, REPORT_FILE)]
    records.write_json_atomically(written[0], {
        "schema_version": SCHEMA_VERSION,
        "run_id": found.run.run_id,
        "experiment": found.run.manifest.experiment.module,
        "run_status": found.run.status,
        "created_at": utc_now(),
        "command_line": list(getattr(sys, "orig_argv", sys.argv)),
        "build": buildinfo.current().as_dict(),
        "experiment_code_from_source_tree": from_source,
        **_seed_record(seed),
        "checkpoints": [
            {"name": r.checkpoint.name, "path": str(r.checkpoint.path), "iteration": r.checkpoint.iteration,
             "env_steps": r.checkpoint.env_steps, "reports": {k: v.as_dict() for k, v in r.reports.items()}}
            for r in results
        ],
    })
    last = results[-1]
    for kind in last.reports:
        path = os.path.join(folder, f"probe_r2_{kind}.png")
        steps = [(_step(r.checkpoint), r.reports[kind]) for r in results]
        x_label = "env steps" if all(r.checkpoint.env_steps is not None for r in results) else "iteration"
        save_figure(probe_r2_figure(steps, x_label=x_label), path)
        written.append(path)
        dataset, report = last.datasets[kind], last.reports[kind]
        if dataset.targets.shape[1] == 3:
            best = max(report.layers, key=lambda layer: layer.test.r2)
            path = os.path.join(folder, f"belief_simplex_{kind}.png")
            title = f"{last.checkpoint.name}, {best.layer} (held-out R^2 {best.test.r2:.3f}), {kind}"
            predicted = best.probe.predict(dataset.activations[best.layer])
            save_figure(belief_simplex_figure(dataset.targets, predicted=predicted, title=title), path)
            written.append(path)
    curves = _learning_curves(found)
    if curves is not None:
        path = os.path.join(folder, "learning_curves.png")
        save_figure(curves, path)
        written.append(path)
    return written


def _step(checkpoint: RunCheckpoint) -> float:
    return checkpoint.env_steps if checkpoint.env_steps is not None else (checkpoint.iteration or 0)


def _learning_curves(found: RunArtifacts):
    """The harness's summary curves against env steps (or iterations) from metrics.jsonl, if any."""
    path = found.artifacts_dir / records.METRICS_FILE
    rows = records.read_json_lines(str(path)) if path.is_file() else []
    present = {key for row in rows for key in row}
    x = metric_keys.ENV_STEPS if metric_keys.ENV_STEPS in present else metric_keys.ITERATION
    ys = [key for key in session.DEFAULT_SUMMARY_KEYS if key in present and key not in (x, metric_keys.ENV_STEPS)]
    if x not in present or not ys:
        print(f"no learning curves: {path} has no rows with {x} and any of {session.DEFAULT_SUMMARY_KEYS}")
        return None
    return learning_curves_figure(rows, x=x, ys=ys, title=found.run.run_id)


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
        raise UsageError(f"{module_name}.probe_plan could not be called as probe_plan(smoke={smoke}) ({error}):"
                         " it takes whether the run was a smoke run; define `def probe_plan(smoke: bool)`") from None
    if not isinstance(plan, ProbePlan):
        raise UsageError(f"{module_name}.probe_plan() returned {type(plan).__name__}, not a ProbePlan")
    return plan


def _rerun_from_source(workspace: str, module_name: str) -> None:
    print(f"{module_name} is not part of this binary; probing with the source tree {workspace} "
          "(the experiment's code is not covered by the build hash)", file=sys.stderr)
    search_path = os.pathsep.join(filter(None, [workspace, os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": search_path, FROM_SOURCE_ENV: "1"}
    for name in (settings.BUILD_INFO_ENV, settings.BUILD_STAMP_ENV):
        environment.pop(name, None)  # this binary's build identity does not describe the source tree
    # The source tree first and -P (no script folder on sys.path): every rl package comes from it.
    os.execve(sys.executable, [sys.executable, "-P", "-m", "rl.analysis.probe_command", *sys.argv[1:]], environment)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--checkpoints", choices=("all", "last"), default="all")
    parser.add_argument("--seed", type=int, default=None,
                        help="entropy of the probe's seed sequence (default: the run's own probe stream, which"
                             " repeats its in-run probes; recorded)")
    parser.add_argument("--results-dir", help="where to look for results/<run-id> (default: the workspace)")
    parser.add_argument("--artifacts-dir", help="an artifacts root holding <run-id>/ if not where recorded")
    parser.add_argument("--module-id", default="default_policy", help="the RLModule to probe in each checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    # `bazel run` starts binaries in their runfiles: relative paths mean the caller's folder.
    caller = os.environ.get("BUILD_WORKING_DIRECTORY", os.getcwd())
    results_dir, artifacts_dir = (os.path.join(caller, path) if path else None
                                  for path in (options.results_dir, options.artifacts_dir))
    roots = [results_dir or os.environ.get("BUILD_WORKSPACE_DIRECTORY") or caller]
    try:
        found = find_checkpoints(options.run_id, roots=roots, artifacts_root=artifacts_dir)
        plan = load_probe_plan(found.run.manifest.experiment.module or "", smoke=found.run.manifest.smoke)
        seed = (recorded_probe_seed(found.run.manifest) if options.seed is None
                else np.random.SeedSequence(options.seed))
    except HarnessError as error:
        print(f"probe: error: {error}", file=sys.stderr)
        return error.exit_status
    # Probing runs on the CPU, one torch thread per process (as every harness binary).
    hardware.apply_process_settings(hardware.choose_profile("cpu", hardware.detect_machine()))
    if options.checkpoints == "last":
        found = dataclasses.replace(found, checkpoints=found.checkpoints[-1:])
    results = probe_checkpoints(found, plan, seed=seed, module_id=options.module_id,
                                show_progress=not options.no_progress)
    for path in write_outputs(found, results, seed, from_source=bool(os.environ.get(FROM_SOURCE_ENV))):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
