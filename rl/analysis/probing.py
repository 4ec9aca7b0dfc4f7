"""Probing a run's checkpoints, as a library: the loop, the report and the figures, for the
probe command (`bazel run //rl/analysis:probe -- <run-id>`) and for a recipe probing itself.

    from rl.analysis import probing
    from rl.analysis.checkpoints import from_context

    seed = probing.probe_seed(context.seeds)                 # the run's `probe` stream
    results = probing.probe_checkpoints(from_context(context), plan, seed=seed, module_id="default_policy")
    for name, data in probing.probe_outputs(from_context(context), results, seed, rows=context.metrics(),
                                            from_source=False).items():
        context.write_output(name, data)                     # listed in the manifest's outputs

Inside a run, a SIGINT or SIGTERM stops the loop before the next checkpoint, stage or layer:
`ProbingStopped` (a KeyboardInterrupt) skips the rest, the harness records the run `interrupted`
(exit 130/143), and the printed line names the probe command that finishes the job later.

`probe_outputs` returns what the probe writes (name -> JSON document or PNG bytes); the caller
chooses where it goes, so a run lists its outputs in its manifest and the command writes into a
finished run's results folder.

    probe_report.json                 per checkpoint and distribution: the full ProbeReport
    probe_r2_<distribution>.png       held-out R^2 per layer across checkpoints (bootstrap bars)
    belief_simplex_<distribution>.png last checkpoint, best layer: true vs predicted (3 states)
    learning_curves.png               from the run's metrics rows
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
from matplotlib.figure import Figure

from rl.analysis.adapters import ProbePlan
from rl.analysis.checkpoints import RunArtifacts, RunCheckpoint, load_rl_module
from rl.analysis.modules import AnalysisView
from rl.analysis.plots import belief_simplex_figure, figure_png, learning_curves_figure, probe_r2_figure
from rl.analysis.probes import ProbeDataset, ProbeReport, probe_layers
from rl.analysis.progress import ProgressBar
from rl.analysis.rollouts import collect_rollouts, context_dataset
from rl.analysis.seeds import child_stream
from rl.harness import RunManifest
from rl.harness.run import buildinfo, metric_keys, metrics_stream, records, seeding, status

REPORT_FILE = "probe_report.json"
LEARNING_CURVES_FILE = "learning_curves.png"
PROBE_STREAM = "probe"  # the run's seed stream its probes draw from, in-run and in the probe command
PROBE_USES = ("contexts", "rollouts", "rollout_probes")
SCHEMA_VERSION = 1
PROBE_COMMAND = "./bazelw run //rl/analysis:probe -- {run_id}"  # printed: runs as printed from the repository root


class ProbingStopped(KeyboardInterrupt):
    """A stop signal reached a run while it probed: the rest was skipped (the message names the command to finish)."""


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
    splits and resamples (one child of `seed` per use), so differences between checkpoints are paired.

    With `show_progress`, each collection shows its own bar and, after each checkpoint, one line gives
    the stage's count and ETA (`probing 3 checkpoint(s) of <run> [###...] 33% 1/3 40.0 s elapsed, 80.0 s left`).
    """
    streams = _uses(seed)
    results = []
    # Counts the stage; its line is printed after each checkpoint, between the collections' own bars.
    stage = ProgressBar(
        total=max(1, len(found.checkpoints)),
        enabled=False,
        label=f"probing {len(found.checkpoints)} checkpoint(s) of {found.run.run_id}",
    )

    def stop_if_asked() -> None:
        """Raises ProbingStopped once the running run got SIGINT/SIGTERM (checked between checkpoints, stages, layers)."""
        signal_name = found.stop_signal()
        if signal_name is not None:
            message = (
                f"{signal_name}: probing stopped after {len(results)} of {len(found.checkpoints)} checkpoints,"
                f" the rest skipped; probe them later with `{PROBE_COMMAND.format(run_id=found.run.run_id)}`"
            )
            print(message, flush=True)
            raise ProbingStopped(message)

    for checkpoint in found.checkpoints:
        stop_if_asked()
        module = load_rl_module(checkpoint.path, module_id)
        provenance = {
            "run_id": found.run.run_id,
            "checkpoint": checkpoint.name,
            "iteration": checkpoint.iteration,
            "env_steps": checkpoint.env_steps,
        }
        datasets, reports = {}, {}
        if plan.contexts:
            dataset = context_dataset(
                AnalysisView(module),
                plan.contexts.adapter,
                max_length=plan.contexts.max_length,
                group_prefix_length=plan.contexts.group_prefix_length,
                batch_size=plan.contexts.batch_size,
                show_progress=show_progress,
            )
            datasets[dataset.distribution.kind] = dataset
            reports[dataset.distribution.kind] = probe_layers(
                dataset,
                seed=streams["contexts"],
                options=plan.options,
                provenance=provenance,
                before_each_layer=stop_if_asked,
            )
        if plan.rollouts:
            stop_if_asked()
            rollouts = collect_rollouts(
                module,
                plan.rollouts.adapter,
                num_episodes=plan.rollouts.num_episodes,
                max_steps=plan.rollouts.max_steps,
                seed=streams["rollouts"],
                batch_size=plan.rollouts.batch_size,
                stochastic=plan.rollouts.stochastic,
                policy=f"run {found.run.run_id} {checkpoint.name}",
                show_progress=show_progress,
            )
            dataset = rollouts.probe_dataset(plan.rollouts.target)
            datasets[dataset.distribution.kind] = dataset
            reports[dataset.distribution.kind] = probe_layers(
                dataset,
                seed=streams["rollout_probes"],
                options=plan.options,
                provenance=provenance,
                before_each_layer=stop_if_asked,
            )
        results.append(CheckpointProbes(checkpoint, reports, datasets))
        for kind, report in reports.items():
            best = max(report.layers, key=lambda layer: layer.test.r2)
            low, high = best.bootstrap["r2"]
            print(
                f"{checkpoint.name} {kind}: best {best.layer} R^2 {best.test.r2:.4f} [{low:.4f}, {high:.4f}]"
                f" (baseline {best.baseline.r2:.4f}, shuffled {best.shuffle_control.r2:.4f},"
                f" null p {best.permutation_null['p_value']:.3g})"
            )
        stage.advance()
        if show_progress:
            print(stage.line(), file=sys.stderr, flush=True)
    return results


def _seed_record(seed: np.random.SeedSequence) -> dict:
    """How a report records its seed: the parent's entropy (and spawn key, if any) and each use's child."""
    record = {"seed": int(seed.entropy)}
    if seed.spawn_key:
        record["seed_spawn_key"] = [int(word) for word in seed.spawn_key]
    record["seed_streams"] = {
        f"probe/{name}": {"kind": "sequence", "spawn_key": [int(w) for w in child.spawn_key]}
        for name, child in _uses(seed).items()
    }
    return record


def probe_outputs(
    found: RunArtifacts,
    results: list[CheckpointProbes],
    seed: np.random.SeedSequence,
    *,
    rows: list[dict],
    from_source: bool,
) -> dict[str, object]:
    """What a probe of `found` writes: name -> JSON document or PNG bytes (see the module docstring).

    `rows` are the run's metrics rows (RunContext.metrics(), or its metrics.jsonl) for the learning curves.
    """
    outputs: dict[str, object] = {
        REPORT_FILE: {
            "schema_version": SCHEMA_VERSION,
            "run_id": found.run.run_id,
            "experiment": found.run.manifest.experiment.module,
            "run_status": found.run.status,
            "created_at": status.utc_now(),
            "command_line": list(getattr(sys, "orig_argv", sys.argv)),
            "build": buildinfo.current().as_dict(),
            "experiment_code_from_source_tree": from_source,
            **_seed_record(seed),
            "checkpoints": [
                {
                    "name": r.checkpoint.name,
                    "path": str(r.checkpoint.path),
                    "iteration": r.checkpoint.iteration,
                    "env_steps": r.checkpoint.env_steps,
                    "reports": {k: v.as_dict() for k, v in r.reports.items()},
                }
                for r in results
            ],
        }
    }
    last = results[-1]
    for kind in last.reports:
        steps = [(_step(r.checkpoint), r.reports[kind]) for r in results]
        x_label = "env steps" if all(r.checkpoint.env_steps is not None for r in results) else "iteration"
        outputs[f"probe_r2_{kind}.png"] = figure_png(probe_r2_figure(steps, x_label=x_label))
        simplex = best_layer_simplex(last, kind, label=last.checkpoint.name)
        if simplex is not None:
            outputs[f"belief_simplex_{kind}.png"] = figure_png(simplex)
    curves = learning_curves(rows, title=found.run.run_id)
    if curves is not None:
        outputs[LEARNING_CURVES_FILE] = figure_png(curves)
    return outputs


def best_layer_simplex(probes: CheckpointProbes, kind: str, *, label: str) -> Figure | None:
    """True vs predicted belief at the layer with the best held-out R^2, for a 3-state belief; else None."""
    dataset, report = probes.datasets[kind], probes.reports[kind]
    if dataset.targets.shape[1] != 3:
        return None
    best = max(report.layers, key=lambda layer: layer.test.r2)
    title = f"{label}, {best.layer} (held-out R^2 {best.test.r2:.3f}), {kind}"
    predicted = best.probe.predict(dataset.activations[best.layer])
    return belief_simplex_figure(dataset.targets, predicted=predicted, title=title)


def _step(checkpoint: RunCheckpoint) -> float:
    return checkpoint.env_steps if checkpoint.env_steps is not None else (checkpoint.iteration or 0)


def learning_curves(rows: list[dict], *, title: str) -> Figure | None:
    """The harness's summary curves against env steps (or iterations), or None when the rows have none."""
    present = {key for row in rows for key in row}
    x = metric_keys.ENV_STEPS if metric_keys.ENV_STEPS in present else metric_keys.ITERATION
    ys = [
        key for key in metrics_stream.DEFAULT_SUMMARY_KEYS if key in present and key not in (x, metric_keys.ENV_STEPS)
    ]
    if x not in present or not ys:
        print(f"no learning curves: no metrics row has {x} and any of {metrics_stream.DEFAULT_SUMMARY_KEYS}")
        return None
    return learning_curves_figure(rows, x=x, ys=ys, title=title)


def metrics_rows(found: RunArtifacts) -> list[dict]:
    """A finished run's metrics rows, a resumed run's after those it continues (`records.read_run_rows`); [] when
    it logged none."""
    return records.read_run_rows(found.artifacts_dir)
