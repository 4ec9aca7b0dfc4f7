"""Learning curves from a run's metrics.jsonl, and probe R^2 per layer across checkpoints.

    from rl.analysis.plots import learning_curves_figure, probe_r2_figure, save_figure

    figure = learning_curves_figure(rows, x="num_env_steps_sampled_lifetime",
                                    ys=["env_runners/episode_return_mean"])
    figure = learning_curves_figure(rows, x=..., ys=[name], scales={name: ScoreScale(...)})  # + normalised axis
    figure = probe_r2_figure([(1000, report_a), (2000, report_b)], x_label="env steps")
    save_figure(figure, path)

Rows are dicts as the harness writes them (nested RLlib results are flattened to `a/b` keys).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from rl.analysis.probes import ProbeReport, metric_table
from rl.analysis.scores import ScoreScale
from rl.harness.run import rows as metric_rows


def learning_curves_figure(
    rows: Sequence[Mapping],
    *,
    x: str,
    ys: Sequence[str],
    title: str = "",
    scales: Mapping[str, ScoreScale] | None = None,
) -> Figure:
    """One panel per metric in `ys` against `x`; rows missing a value are skipped for that metric.

    A metric with a ScoreScale in `scales` gets its two references as dashed lines and a
    normalised axis on the right (0 at the zero reference, 1 at the one reference); its axis
    starts at most SCALE_SPANS_SHOWN spans below the zero reference, so early outliers (an
    untrained policy's return) do not flatten the range where the references lie.
    """
    scales = dict(scales or {})
    unknown = sorted(set(scales) - set(ys))
    if unknown:
        raise KeyError(f"scales given for {unknown}, which are not among the plotted metrics {list(ys)}")
    flat = [metric_rows.flatten_scalars(dict(row)) for row in rows]
    available = sorted({key for row in flat for key, value in row.items() if _is_number(value)})
    for name in (x, *ys):
        if name not in available:
            raise KeyError(f"no numeric metric {name!r} in these rows; available: {available}")
    figure = Figure(figsize=(5, 3 * len(ys)), dpi=120)
    for index, name in enumerate(ys):
        axes = figure.add_subplot(len(ys), 1, index + 1)
        points = [(row[x], row[name]) for row in flat if _is_number(row.get(x)) and _is_number(row.get(name))]
        axes.plot(*zip(*points), marker=".", linewidth=1)
        if name in scales:
            _draw_scale(axes, scales[name], [value for _, value in points])
        axes.set_ylabel(name, fontsize=8)
        axes.set_xlabel(x, fontsize=8)
        axes.grid(alpha=0.3)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure


def probe_r2_figure(points: Sequence[tuple[float, ProbeReport]], *, x_label: str, title: str = "") -> Figure:
    """Held-out R^2 per layer at each checkpoint, with the bootstrap interval as error bars."""
    steps = np.array([step for step, _ in points], dtype=np.float64)
    reports = [report for _, report in points]
    table = metric_table(reports, "r2")  # also checks that the reports agree on target and layers
    figure = Figure(figsize=(6, 4), dpi=120)
    axes = figure.add_subplot(1, 1, 1)
    for layer, r2 in table.items():
        low, high = np.array([report.layer(layer).bootstrap["r2"] for report in reports]).T
        # A percentile interval need not contain the point estimate: clip the bars at it.
        errors = np.clip([np.array(r2) - low, high - np.array(r2)], 0.0, None)
        axes.errorbar(steps, r2, yerr=errors, marker="o", capsize=3, label=layer)
    axes.axhline(0.0, color="0.5", linewidth=0.8, linestyle="--")
    axes.set_xlabel(x_label)
    axes.set_ylabel(f"held-out R^2 ({reports[0].target_name})")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    distributions = {json.dumps(report.distribution.as_dict(), sort_keys=True) for report in reports}
    first = reports[0].distribution
    axes.set_title(
        title
        or f"{first.kind} of {first.source}"
        + (
            " (one distribution for all checkpoints)"
            if len(distributions) == 1
            else " (each checkpoint's own distribution: compare R^2, not raw MSE)"
        ),
        fontsize=8,
    )
    figure.tight_layout()
    return figure


SCALE_SPANS_SHOWN = 3.0


def _draw_scale(axes, scale: ScoreScale, values: Sequence[float]) -> None:
    span = scale.one - scale.zero
    low, high = sorted((scale.zero, scale.one))
    margin = 0.1 * abs(span)
    axes.set_ylim(max(min(values), low - SCALE_SPANS_SHOWN * abs(span)) - margin, max(max(values), high) + margin)
    for value, label, color in ((scale.zero, scale.zero_name, "tab:red"), (scale.one, scale.one_name, "tab:green")):
        axes.axhline(value, linestyle="--", linewidth=1, color=color, label=f"{label} ({value:.4g})")
    axes.legend(fontsize=7, loc="lower right")
    right = axes.secondary_yaxis(
        "right", functions=(lambda v: (v - scale.zero) / span, lambda s: scale.zero + s * span)
    )
    right.set_ylabel("normalised", fontsize=8)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
