"""`rl-harness compare <run-id>...`: several runs' learning curves in one PNG, and their final metrics.

    runs = [finder.find_run(run_id, roots) for run_id in run_ids]
    for line in compare.warnings(runs, [metric_keys.RETURN]): print(line, file=sys.stderr)  # a repeated seed, ...
    compare.write_figure(runs, [metric_keys.RETURN], path)  # one panel per metric, one line (or marker) per run
    compare.default_output(runs)          # <results root>/comparisons/a_vs_b.png: inside the results tree
    print("\\n".join(compare.format_table(runs)))                        # one row per metric, one column per run

Curves come from each run's summary.json (committed with its results, so runs from other
machines compare too): up to 100 points per curve, drawn against env steps when every run counts
them (else against training iterations). A Tune run draws one line per trial.
"""

from __future__ import annotations

import hashlib
import io
import pathlib
from collections.abc import Iterable

import numpy as np

from rl.harness.commands import catalog
from rl.harness.errors import UsageError
from rl.harness.run import finder, metric_keys, records
from rl.harness.run.layout import COMPARISONS_DIR, RunLayout

DEFAULT_METRICS = (metric_keys.RETURN,)
# Under the first run's results root, which provenance leaves out: a figure never dirties the next run.
_LONGEST_NAME = 200
PANEL_SIZE = (6.0, 3.6)  # inches per metric


def default_output(runs: list[finder.Run]) -> pathlib.Path:
    """Where `compare` writes without --output: `<results root>/comparisons/<id>_vs_<id>.png` (a hash if too long)."""
    root = RunLayout.of_run(runs[0].run_dir, runs[0].manifest).results_root
    name = "_vs_".join(run.run_id for run in runs)
    if len(name) > _LONGEST_NAME:
        name = hashlib.sha256(name.encode()).hexdigest()[:16]
    return root / COMPARISONS_DIR / f"{name}.png"


def _groups(run: finder.Run) -> list[tuple[str, dict]]:
    """(label, curves) of the run's own rows and of each Tune trial's; curves: key -> summary entry."""
    summary, label = run.summary(), f"{run.run_id} (seed {run.manifest.seed})"
    groups = [(label, summary.get("metrics") or {})]
    groups += [(f"{label} {trial}", curves) for trial, curves in sorted((summary.get("trial_metrics") or {}).items())]
    return [(label, curves) for label, curves in groups if curves]


def _points(entry: dict) -> np.ndarray:
    """A summary curve as an (n, 2) array of [training iteration, value], unfinished values dropped."""
    points = [(x, y) for x, y in entry.get("curve") or [] if isinstance(y, (int, float)) and np.isfinite(y)]
    return np.array(points, dtype=float).reshape(-1, 2)


def _in_env_steps(curves: dict, iterations: np.ndarray) -> np.ndarray:
    """The env steps at `iterations`, from the run's own env-steps curve (monotonic in the iteration)."""
    counted = _points(curves[metric_keys.ENV_STEPS])
    return np.interp(iterations, counted[:, 0], counted[:, 1])


def figure(runs: list[finder.Run], metrics: Iterable[str]):
    """One panel per metric, one line per run (per trial of a Tune run); a curve of one point is a marker."""
    from matplotlib.figure import Figure  # only `compare` draws: the other commands stay fast

    metrics = list(metrics)
    groups = [group for run in runs for group in _groups(run)]
    summarised = sorted({key for _, curves in groups for key in curves})
    missing = [metric for metric in metrics if not any(metric in curves for _, curves in groups)]
    if missing:
        raise UsageError(
            f"no run summarises {', '.join(missing)}; pick --metric from {', '.join(summarised)} (a recipe"
            " adds its own with context.session.summarize)"
        )
    by_env_steps = all(metric_keys.ENV_STEPS in curves for _, curves in groups)
    drawing = Figure(figsize=(PANEL_SIZE[0], PANEL_SIZE[1] * len(metrics)), layout="constrained")
    for axes, metric in zip(drawing.subplots(len(metrics), 1, squeeze=False)[:, 0], metrics):
        for label, curves in groups:
            points = _points(curves[metric]) if metric in curves else np.empty((0, 2))
            if not len(points):
                continue
            x = _in_env_steps(curves, points[:, 0]) if by_env_steps else points[:, 0]
            axes.plot(x, points[:, 1], label=label, marker="o" if len(points) == 1 else None)
        axes.set_xlabel("env steps" if by_env_steps else "training iteration")
        axes.set_ylabel(metric)
        if axes.lines:
            axes.legend(fontsize="small")
        else:
            axes.text(0.5, 0.5, f"no run has a finite value of {metric}", transform=axes.transAxes, ha="center")
    return drawing


def write_figure(runs: list[finder.Run], metrics: Iterable[str], path: pathlib.Path) -> None:
    """`figure(runs, metrics)` written as a PNG at `path` (atomically)."""
    png = io.BytesIO()
    figure(runs, metrics).savefig(png, format="png", dpi=100)
    records.write_bytes_atomically(str(path), png.getvalue())


def format_table(runs: list[finder.Run]) -> list[str]:
    """Status, seed, budget and each summarised metric's final value: one row per metric, one column per run."""
    finals = [catalog.final_metrics(run.summary()) for run in runs]
    rows = [
        ("run", [run.run_id for run in runs]),
        ("status", [run.status for run in runs]),
        ("seed", [str(run.manifest.seed) for run in runs]),
        ("budget", ["smoke" if run.manifest.smoke else "full" for run in runs]),
    ]
    rows += [(key, [_shown(final.get(key)) for final in finals]) for key in sorted({key for f in finals for key in f})]
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(cells[column]) for _, cells in rows) for column in range(len(runs))]
    return [
        "  ".join([label.ljust(label_width), *(cell.ljust(width) for cell, width in zip(cells, widths))]).rstrip()
        for label, cells in rows
    ]


def _shown(value: float | None) -> str:
    return "-" if value is None else catalog.format_number(value)


def warnings(runs: list[finder.Run], metrics: Iterable[str] = DEFAULT_METRICS) -> list[str]:
    """One line per reason the comparison may mislead: runs of one agent sharing a seed, smoke runs beside full
    ones, a curve that cannot be drawn.

    An agent is a recipe with its `--set` overrides: two agents trained from one seed are a paired design, not a repeat.
    """
    lines = []
    by_agent_and_seed: dict = {}
    for run in runs:
        overrides = tuple(sorted((run.manifest.options.get("set") or {}).items()))
        agent_and_seed = (run.manifest.experiment.module, overrides, run.manifest.seed)
        by_agent_and_seed.setdefault(agent_and_seed, []).append(run.run_id)
    for (_, _, seed), run_ids in by_agent_and_seed.items():
        if len(run_ids) > 1:
            lines.append(
                f"warning: runs {', '.join(run_ids)} of one recipe and settings share seed {seed}, so they are"
                " not independent samples; compare runs of different --seed"
            )
    smoke = [run.run_id for run in runs if run.manifest.smoke]
    full = [run.run_id for run in runs if not run.manifest.smoke]
    if smoke and full:
        lines.append(
            f"warning: smoke runs ({', '.join(smoke)}) beside full runs ({', '.join(full)}): their budgets"
            " differ; compare smoke with smoke and full with full"
        )
    for metric in metrics:
        undrawn = [
            label
            for run in runs
            for label, curves in _groups(run)
            if metric in curves and not len(_points(curves[metric]))
        ]
        if undrawn:
            lines.append(f"note: no curve of {metric} for {', '.join(undrawn)}: no finite value was summarised")
    return lines
