"""A study's summary: per agent each score over seeds (the mean with its t interval, the mean, median and
IQM with bootstrap intervals), paired agent differences and probabilities of improvement, learning
curves with bands, score distributions; and the refusals that keep a summary honest.

    results = [summary.load_member(results_root, member_record, smoke=False) for member_record in record.members]
    summary.check_comparable(results)            # StudyRefused (exit 2): one line naming the runs at fault
    written = summary.write_summary(folder, study, results)   # summary.json, summary.md, curves.png, distributions.png

The statistics are `statistics.py`'s: `over_seeds` per agent and score, `paired_difference` (`a - b`
seed by seed) and `probability_of_improvement` (every seed of a against every seed of b) per pair;
the study's `statistic` heads the table. A member whose run failed, was interrupted or never ran is
left out of the intervals and named in `not_completed`: never dropped silently.
"""

from __future__ import annotations

import dataclasses
import io
import math
import pathlib
from collections.abc import Iterable
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers
from matplotlib.figure import Figure

from rl.harness.errors import UsageError
from rl.harness.run import metric_keys, records
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import RunManifest, read_manifest
from rl.harness.run.rows import RowBudget
from rl.harness.study import statistics
from rl.harness.study.declaration import Member, Study
from rl.harness.study.record import COMPLETED, PENDING, MemberRecord

SUMMARY_JSON, SUMMARY_MARKDOWN, CURVES_PNG = "summary.json", "summary.md", "curves.png"
DISTRIBUTIONS_PNG = "distributions.png"
THRESHOLDS = 200  # points of each score's range at which its distribution is drawn
SHOWN_QUANTILE = 0.02  # the distributions' axis: from this quantile of every seed's score to 1 minus it
CURVE_POINTS = 100  # env-step grid the seeds' curves are interpolated onto for the bands

# Options that differ between the members of one agent by design (or say nothing about the training).
_PER_RUN_OPTIONS = frozenset(
    {
        "seed",
        "run_id",
        "results_dir",
        "artifacts_dir",
        "resume_from",
        "upload_artifacts",
        "ray_address",
        "hardware_profile",
    }
)


class StudyRefused(UsageError):
    """The runs cannot be summarised together (mixed smoke and full, a repeated seed, other code or configuration)."""


@dataclasses.dataclass(frozen=True)
class MemberResult:
    """One member's runs as recorded: every attempt in order, the last one's status and outcome."""

    member: Member
    run_ids: tuple[str, ...]
    manifests: tuple[RunManifest, ...]
    run_dirs: tuple[pathlib.Path, ...]
    artifacts_dirs: tuple[pathlib.Path, ...]  # where each run's metrics.jsonl is (curves need the artifacts)
    # curve(key), read once: the summary and the plot both draw on it (a frozen record, a mutable cache).
    _curves: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def status(self) -> str:
        return self.manifests[-1].effective_status if self.manifests else PENDING

    @property
    def last(self) -> RunManifest | None:
        return self.manifests[-1] if self.manifests else None

    @property
    def duration_seconds(self) -> float | None:
        """The compute time of its runs, each start to end (resumed attempts added up); None before any ran."""
        durations = [manifest.duration_seconds for manifest in self.manifests]
        known = [duration for duration in durations if duration is not None]
        return sum(known) if known else None

    def outcome(self) -> dict:
        path = self.run_dirs[-1] / records.SUMMARY_FILE if self.run_dirs else None
        if path is None or not path.exists():
            return {}
        return records.read_json(str(path), "run summary").get("outcome") or {}

    def curve(self, key: str) -> list[tuple[float, float]]:
        """(env steps, value) over the attempts: each resumed attempt continues where its checkpoint left off.

        Empty without the runs' artifacts (metrics.jsonl is there; results/ holds only the summary).
        """
        if key not in self._curves:
            self._curves[key] = self._read_curve(key)
        return self._curves[key]

    def _read_curve(self, key: str) -> list[tuple[float, float]]:
        points: list[tuple[float, float]] = []
        for manifest, artifacts_dir in zip(self.manifests, self.artifacts_dirs):
            start = (manifest.parent_run or {}).get("env_steps")
            points = [point for point in points if start is not None and point[0] <= start]
            path = artifacts_dir / records.METRICS_FILE
            for row in records.read_json_lines(str(path)) if path.exists() else ():
                x, y = row.get(metric_keys.ENV_STEPS), row.get(key)
                if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(y):
                    points.append((float(x), float(y)))
        return points


def load_member(
    results_root: pathlib.Path, member: MemberRecord, artifacts_root: pathlib.Path | None = None
) -> MemberResult:
    """Reads a member's runs; RecordError naming the run when a folder is missing or its manifest damaged.

    Their artifacts are read under `artifacts_root` (the study's), else beside `results_root`.
    """
    manifests, run_dirs, artifacts_dirs = [], [], []
    for run_id in member.runs:
        run_dir = RunLayout.find(results_root, run_id)
        if run_dir is None:
            raise records.RecordError(
                f"run {run_id} of {member.member.name} is not under {results_root}; restore its"
                " results folder (git, B2) or pass the --results-dir it was written to"
            )
        manifests.append(read_manifest(run_dir))
        run_dirs.append(pathlib.Path(run_dir))
        artifacts_dirs.append(RunLayout.of_run(run_dir, manifests[-1], artifacts_root).artifacts_dir)
    return MemberResult(member.member, tuple(member.runs), tuple(manifests), tuple(run_dirs), tuple(artifacts_dirs))


# -- refusals --------------------------------------------------------------------------------------


def _settings(manifest: RunManifest) -> tuple:
    options = {key: value for key, value in manifest.options.items() if key not in _PER_RUN_OPTIONS}
    return (
        manifest.experiment.module,
        tuple(sorted((key, repr(value)) for key, value in options.items())),
        repr(manifest.budget_cap),
    )


def _code(manifest: RunManifest) -> str:
    return describe_code(manifest.code)


def describe_code(code) -> str:
    """`<commit>[+uncommitted <diff>]` of the library (and of the experiment's repository when it is another)."""

    def state(name):
        found = code.get(name) or {}
        commit = (found.get("commit") or "no commit")[:10]
        return commit + (f"+uncommitted {found['diff_sha256'][:8]}" if found.get("dirty") else "")

    library, experiment = state("library"), state("experiment_repo")
    return library if experiment == library else f"library {library}, experiment {experiment}"


def _groups(runs: Iterable[tuple[str, Any]]) -> str:
    """`value (runs a, b); value (runs c)` for the distinct values, in first-seen order."""
    found: dict[Any, list[str]] = {}
    for run_id, value in runs:
        found.setdefault(value, []).append(run_id)
    return "; ".join(f"{_short(value)} (runs {', '.join(ids)})" for value, ids in found.items())


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_comparable(results: Iterable[MemberResult]) -> None:
    """StudyRefused with one line naming the runs at fault, if the finished runs may not be summarised together."""
    last = [(result.run_ids[-1], result) for result in results if result.manifests]
    if not last:
        return
    smoke = [(run_id, "smoke" if result.last.smoke else "full") for run_id, result in last]
    if len({value for _, value in smoke}) > 1:
        raise StudyRefused(f"these runs mix smoke and full budgets: {_groups(smoke)}; summarise one kind")
    seen: dict[tuple[str, int], str] = {}
    for run_id, result in last:
        key = (result.member.variant, result.last.seed)
        if key in seen:
            raise StudyRefused(
                f"agent {key[0]} repeats seed {key[1]}: runs {seen[key]} and {run_id}; give each seed once"
            )
        seen[key] = run_id
    for what, read in (("commit", _code), ("lock", lambda m: m.build.get("lock_sha256"))):
        values = [(run_id, read(result.last)) for run_id, result in last]
        if len({value for _, value in values}) > 1:
            raise StudyRefused(f"these runs differ in {what}: {_groups(values)}; re-run the odd ones at one {what}")
    for agent in dict.fromkeys(result.member.variant for _, result in last):
        values = [(run_id, _settings(result.last)) for run_id, result in last if result.member.variant == agent]
        if len({value for _, value in values}) > 1:
            raise StudyRefused(
                f"agent {agent}'s runs differ in configuration (recipe, options, budget cap):"
                f" {_groups(values)}; re-run them with one configuration"
            )


# -- the summary --------------------------------------------------------------------------------


def summarise(study: Study, results: Iterable[MemberResult]) -> dict:
    """Scores per agent over its completed seeds, paired differences, and every member not completed."""
    results = list(results)
    completed = [result for result in results if result.status == COMPLETED]
    variants = {r.member.variant: r.member.agent for r in results}  # the members' own, in member order
    scores: dict[str, dict[str, dict[int, float]]] = {
        variant: {s.name: {} for s in study.scores} for variant in variants
    }
    missing: list[tuple[MemberResult, str]] = []
    for result in completed:
        outcome = result.outcome()
        for score in study.scores:
            value = score.read(outcome)
            if value is None:
                missing.append((result, score.name))
            else:
                scores[result.member.variant][score.name][result.member.seed] = value
    # A score no run of an agent reports is not that agent's (an MLP has no probes); a gap among its seeds is named.
    unreported = [
        {"member": result.member.name, "run": result.run_ids[-1], "score": name}
        for result, name in missing
        if scores[result.member.variant][name]
    ]
    agents = {}
    for variant, by_score in scores.items():
        runs = {str(r.member.seed): r.run_ids[-1] for r in completed if r.member.variant == variant}
        agents[variant] = {
            "recipe": study.agents.get(variants[variant]),
            "runs": runs,
            "scores": {name: statistics.over_seeds(values) for name, values in by_score.items() if values},
        }
    pairs = {}
    for a, b in study.variant_pairs():
        if a not in scores or b not in scores:
            continue
        pairs[f"{a} - {b}"] = {
            name: {
                **statistics.paired_difference(scores[a][name], scores[b][name]),
                "probability_of_improvement": statistics.probability_of_improvement(
                    [scores[a][name][seed] for seed in sorted(scores[a][name])],
                    [scores[b][name][seed] for seed in sorted(scores[b][name])],
                ),
            }
            for name in scores[a]
            if set(scores[a][name]) & set(scores[b][name])
        }
    not_completed = [
        {
            "member": r.member.name,
            "status": r.status,
            "runs": list(r.run_ids),
            "error": r.last.error.message if r.last is not None and r.last.error else None,
        }
        for r in results
        if r.status != COMPLETED
    ]
    # A run copied without its artifacts (results/ only, or another machine's) has scores but no curve.
    without_curve = [
        {"member": r.member.name, "run": r.run_ids[-1], "reason": _why_no_curve(r, study.curve)}
        for r in completed
        if not r.curve(study.curve)
    ]
    last = next((result.last for result in completed), None)  # check_comparable: every run has the same budget
    budget = None if last is None else {"smoke": last.smoke, "cap": last.budget_cap}
    return {
        "members": len(results),
        "completed": len(completed),
        "budget": budget,
        "statistic": study.statistic,
        "bootstrap": statistics.bootstrap_description(),
        "agents": agents,
        "pairs": pairs,
        "not_completed": not_completed,
        "unreported_scores": unreported,
        "curve": study.curve,
        "without_curve": without_curve,
    }


def _why_no_curve(result: MemberResult, key: str) -> str:
    if all((folder / records.METRICS_FILE).exists() for folder in result.artifacts_dirs):
        return f"no finite {key} in its {records.METRICS_FILE}"
    return f"its {records.METRICS_FILE} is not under its artifacts folder here; restore `artifacts/<run id>/`"


def _budget_words(budget: dict | None) -> str:
    if budget is None:
        return ""
    cap = f", capped by {' '.join(RowBudget(**budget['cap']).run_flags())}" if budget.get("cap") else ""
    return f" ({'smoke' if budget['smoke'] else 'full'} budget{cap})"


def curves_figure(study: Study, results: Iterable[MemberResult]) -> Figure:
    """Each agent's learning curve against env steps: mean over its seeds and a 95 % t band (n >= 2).

    Where the seeds' curves share only one env-step count (one row each), the mean is a marker and the
    band an error bar; a figure with nothing to draw says so.
    """
    import numpy as np

    figure = Figure(figsize=(7.5, 4.5))
    axes = figure.add_subplot()
    results = [result for result in results if result.status == COMPLETED]
    for agent in dict.fromkeys(r.member.variant for r in results):
        curves = [np.array(c) for c in (r.curve(study.curve) for r in results if r.member.variant == agent) if c]
        if not curves:
            continue
        start, end = max(curve[0, 0] for curve in curves), min(curve[-1, 0] for curve in curves)
        grid = np.linspace(start, end, CURVE_POINTS) if end > start else np.array([end])
        values = np.stack([np.interp(grid, curve[:, 0], curve[:, 1]) for curve in curves])
        mean = values.mean(axis=0)
        (line,) = axes.plot(
            grid,
            mean,
            label=f"{agent} ({len(curves)} seed{'s' if len(curves) > 1 else ''})",
            marker="o" if len(grid) == 1 else None,
        )
        if len(curves) > 1:
            bands = [statistics.mean_interval(column, spread="t") for column in values.T]
            low, high = np.array([band["low"] for band in bands]), np.array([band["high"] for band in bands])
            if len(grid) == 1:
                axes.errorbar(grid, mean, yerr=[mean - low, high - mean], color=line.get_color(), capsize=4)
            else:
                axes.fill_between(grid, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    axes.set_xlabel("env steps")
    axes.set_ylabel(study.curve)
    axes.set_title("learning curves: mean over seeds, 95 % t band")
    if axes.lines:
        axes.legend(fontsize="small")
    else:
        axes.text(
            0.5,
            0.5,
            f"no completed run has a finite {study.curve}; see {SUMMARY_MARKDOWN}",
            transform=axes.transAxes,
            ha="center",
        )
    return figure


def distributions_figure(summary: dict) -> Figure:
    """Per score, each agent's score distribution: the fraction of its seeds scoring above each value, with a 95 %
    bootstrap band (Agarwal et al.'s performance profiles), over the middle 96 % of all seeds' scores (those off
    the axis are counted in the panel's title). Drawn from the summary alone (each seed's value)."""
    import numpy as np

    names = list(dict.fromkeys(name for entry in summary["agents"].values() for name in entry["scores"]))
    columns = min(3, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / columns))
    figure = Figure(figsize=(4.5 * columns, 3.2 * rows))
    for index, name in enumerate(names):
        axes = figure.add_subplot(rows, columns, index + 1)
        values = {
            agent: list(entry["scores"][name]["values"].values())
            for agent, entry in summary["agents"].items()
            if name in entry["scores"]
        }
        # The axis spans the middle of all agents' seeds: one seed far off would squeeze the rest into a line.
        pooled = np.array([value for found in values.values() for value in found])
        low, high = np.quantile(pooled, [SHOWN_QUANTILE, 1 - SHOWN_QUANTILE])
        margin = 0.05 * (high - low) or 0.5
        thresholds = np.linspace(low - margin, high + margin, THRESHOLDS)
        outside = int(np.sum((pooled < thresholds[0]) | (pooled > thresholds[-1])))
        for agent, found in values.items():
            profile = statistics.fraction_above(found, thresholds)
            (line,) = axes.step(thresholds, profile["fraction"], where="post", label=f"{agent} (n {len(found)})")
            axes.fill_between(
                thresholds, profile["low"], profile["high"], step="post", color=line.get_color(), alpha=0.2, linewidth=0
            )
        axes.set_title(
            name + (f" ({outside} seed{'s' if outside > 1 else ''} off the axis)" if outside else ""),
            fontsize="x-small",
        )
        axes.set_xlabel("score")
        axes.set_ylabel("fraction of seeds above")
        axes.set_ylim(-0.02, 1.02)
        axes.legend(fontsize="x-small")
    if not names:
        figure.add_subplot().text(0.5, 0.5, "no completed run reported a score", ha="center")
    figure.tight_layout()
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def _t_interval(figure: dict) -> str:
    """The mean and its t interval (an agent's score, or a paired difference); one seed's is a point."""
    if figure["n"] == 1:
        return f"{figure['mean']:.3f}"
    return f"{figure['mean']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


def _seeds(n: int) -> str:
    return " (1 seed)" if n == 1 else f" (n {n})"


def _cell(figure: dict) -> str:
    return _t_interval(figure) + _seeds(figure["n"])


def _interval(figure: dict) -> str:
    """A bootstrap estimate: value [low, high]."""
    return f"{figure['value']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


def _headline(score: dict, statistic: str) -> str:
    shown = _t_interval(score) if statistic == "mean" else _interval(score["bootstrap"][statistic])
    return shown + _seeds(score["n"])


def _headline_words(statistic: str) -> str:
    if statistic == "mean":
        return "mean [95 % t interval]"
    return f"{statistics.STATISTIC_NAMES[statistic]} [95 % bootstrap interval]"


def _statistics_tables(summary: dict, names: list[str]) -> list[str]:
    """Per score, every statistic of every agent, and each pair's difference and probability of improvement."""
    bootstrap = summary["bootstrap"]
    lines = [
        "",
        (
            f"Every statistic, per score: 95 % intervals, t for the mean, else percentile bootstrap over seeds"
            f" ({bootstrap['resamples']} resamples, seed {bootstrap['seed']}). P(a > b): the chance that a seed"
            " of a beats a seed of b, ties counting half, over all their seeds."
        ),
    ]
    robust = list(statistics.STATISTICS)
    for name in names:
        lines += [
            "",
            f"{name}:",
            "",
            "| agent | n | mean (t) | "
            + " | ".join(f"{statistics.STATISTIC_NAMES[statistic]} (bootstrap)" for statistic in robust)
            + " |",
            "|---" * (len(robust) + 3) + "|",
        ]
        for agent, entry in summary["agents"].items():
            if name in entry["scores"]:
                score = entry["scores"][name]
                lines.append(
                    f"| {agent} | {score['n']} | {_t_interval(score)} | "
                    + " | ".join(_interval(score["bootstrap"][statistic]) for statistic in robust)
                    + " |"
                )
        pairs = [(pair, entry[name]) for pair, entry in summary["pairs"].items() if name in entry]
        if pairs:
            lines += [
                "",
                "| pair a - b | shared seeds | a - b, mean (t) | P(a > b) (bootstrap) | seeds of a, b |",
                "|---" * 5 + "|",
            ]
            lines += [
                f"| {pair} | {found['n']} | {_t_interval(found)} |"
                f" {_interval(found['probability_of_improvement'])} |"
                f" {', '.join(map(str, found['probability_of_improvement']['n']))} |"
                for pair, found in pairs
            ]
    return lines


def markdown(summary: dict) -> str:
    """The summary as tables: the study's statistic per agent and score, paired differences, every statistic per
    score, members not completed."""
    names = list(dict.fromkeys(name for entry in summary["agents"].values() for name in entry["scores"]))
    lines = [
        (
            f"{summary['completed']} of {summary['members']} members completed{_budget_words(summary.get('budget'))};"
            f" {_headline_words(summary['statistic'])} over seeds."
        ),
        "",
        "| agent | " + " | ".join(names) + " | runs |",
        "|---" * (len(names) + 2) + "|",
    ]
    for agent, entry in summary["agents"].items():
        cells = [
            _headline(entry["scores"][name], summary["statistic"]) if name in entry["scores"] else "-" for name in names
        ]
        lines.append(f"| {agent} | " + " | ".join(cells) + f" | {', '.join(entry['runs'].values()) or '-'} |")
    if summary["pairs"]:
        lines += [
            "",
            "Paired differences (same seeds), mean [95 % t interval]:",
            "",
            "| pair | " + " | ".join(names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]
        for pair, entry in summary["pairs"].items():
            lines.append(
                f"| {pair} | " + " | ".join(_cell(entry[name]) if name in entry else "-" for name in names) + " |"
            )
    lines += _statistics_tables(summary, names)
    if summary["not_completed"]:
        lines += ["", "Not completed (left out of the intervals):", ""]
        lines += [
            f"- {entry['member']}: {entry['status']} (runs {', '.join(entry['runs']) or 'none'})"
            + (f": {entry['error']}" if entry["error"] else "")
            for entry in summary["not_completed"]
        ]
    if summary["unreported_scores"]:
        lines += ["", "Scores a completed run did not report:", ""]
        lines += [f"- {entry['member']} ({entry['run']}): {entry['score']}" for entry in summary["unreported_scores"]]
    if summary["without_curve"]:
        lines += ["", f"Left out of the learning curves ({len(summary['without_curve'])} completed runs):", ""]
        lines += [f"- {entry['member']} ({entry['run']}): {entry['reason']}" for entry in summary["without_curve"]]
    return "\n".join(lines) + "\n"


def write_summary(folder: pathlib.Path, study: Study, results: list[MemberResult]) -> dict:
    """summary.json, summary.md, curves.png and distributions.png in `folder`, replaced together
    (`records.write_files_atomically`: an OSError, e.g. a full disk, leaves the four as they were); returns the summary."""
    found = summarise(study, results)
    records.write_files_atomically(
        str(folder),
        {
            SUMMARY_JSON: records.json_bytes(found),
            SUMMARY_MARKDOWN: markdown(found).encode(),
            CURVES_PNG: _png(curves_figure(study, results)),
            DISTRIBUTIONS_PNG: _png(distributions_figure(found)),
        },
    )
    return found
