"""What `reproduce` concludes when the numeric platform differs: is the outcome the same, statistically?

    quantities = cross_platform.quantities(summary, ignored)      # final metrics and declared scores
    quantities = cross_platform.quantities_at_row(summary, row, ignored)   # a prefix's last row: metrics only
    spread = cross_platform.study_spread(original, ignored)             # a finished study of the same recipe, or None
    judged = cross_platform.judge(quantities_a, quantities_b, spread, rows_a)   # rows: the original's metrics.jsonl
    judged["verdict"]     # "consistent (platform differs)" | "diverged"

A quantity is a final metric (summary.json's summarised curves, timing keys left out) or a score
the recipe returned (its outcome; `x.mean`/`x.low`/`x.high` is one score with its interval).
Each is judged against a yardstick, the first that exists:
  1. the seed spread of the same quantity over a finished study's members of the same recipe (and
     --set overrides): two runs differing only in chance would differ by more than
     t(n-1) * sd * sqrt(2) in a fraction `alpha / m` of cases (m quantities: Bonferroni);
  2. the original's own interval for a score (`low` <= reproduction <= `high`);
  3. for a final metric, the spread of its last CURVE_TAIL rows in the original, by the rule of 1.
A quantity with no yardstick is listed and not judged. The verdict is "diverged" when any judged
quantity falls outside its yardstick, or when nothing could be judged; else "consistent (platform differs)".
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from rl.harness.commands import catalog
from rl.harness.run import finder, records
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import read_manifest
from rl.harness.study import record as study_record
from rl.harness.study import statistics

CONSISTENT = "consistent (platform differs)"
DIVERGED = "diverged"
FAMILY_ALPHA = 0.05  # the chance that chance alone calls some quantity diverged, over all judged quantities
CURVE_TAIL = 5  # rows at the end of the original's curve whose spread is a final metric's last yardstick
_PARTS = ("mean", "low", "high")


def quantities(summary: Mapping, ignored: Callable[[str], bool]) -> dict[str, dict]:
    """{name: {"value": v, "interval": [low, high] | None}} for a run's final metrics and outcome scores."""
    found = {}
    for key, value in catalog.final_metrics(summary).items():
        if not ignored(key) and _number(value):
            found[f"metric {key}"] = {"value": float(value), "interval": None}
    flat = catalog.flatten(summary.get("outcome") or {})
    for key, value in flat.items():
        stem, _, part = key.rpartition(".")
        if part in _PARTS and all(_number(flat.get(f"{stem}.{end}")) for end in _PARTS):
            if part == "mean":
                found[f"score {stem}"] = {
                    "value": float(value),
                    "interval": [flat[f"{stem}.low"], flat[f"{stem}.high"]],
                }
        elif _number(value):
            found[f"score {key}"] = {"value": float(value), "interval": None}
    return found


def quantities_at_row(summary: Mapping, row: Mapping, ignored: Callable[[str], bool]) -> dict[str, dict]:
    """The run's summarised metrics as one row holds them (the last row of a compared prefix); no scores."""
    return {
        f"metric {key}": {"value": float(row[key]), "interval": None}
        for key in sorted(summary.get("metrics") or {})
        if not ignored(key) and _number(row.get(key))
    }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_settings(manifest, options: Mapping) -> bool:
    return (manifest.options.get("set") or {}) == (options.get("set") or {}) and manifest.options.get(
        "smoke"
    ) == options.get("smoke")


def study_spread(original: finder.Run, ignored: Callable[[str], bool]) -> dict | None:
    """The newest completed study beside `original` whose agent is `original`'s recipe with its overrides:
    {"study": id, "members": n, "values": {quantity: [one value per member]}}; None without one."""
    manifest = original.manifest
    results_root = RunLayout.of_run(original.run_dir, manifest).results_root
    studies = pathlib.Path(results_root, *([records.SMOKE_DIR] if manifest.smoke else []), study_record.STUDIES_DIR)
    candidates = []
    for study_file in sorted(studies.glob(f"*/{study_record.STUDY_FILE}")):
        try:
            study = study_record.StudyRecord.read(study_file.parent)
        except records.RecordError:
            continue
        agents = {name for name, module in study.grid.get("agents", {}).items() if module == manifest.experiment.module}
        if study.status == study_record.COMPLETED and agents:
            candidates.append((study.updated_at, study, agents))
    for _, study, agents in sorted(candidates, key=lambda candidate: candidate[0], reverse=True):
        values: dict[str, list[float]] = {}
        members = 0
        for member in study.members:
            run_dir = RunLayout.find(results_root, member.last_run) if member.last_run else None
            if member.agent not in agents or member.status != study_record.COMPLETED or run_dir is None:
                continue
            run = finder.Run(str(run_dir), read_manifest(run_dir))
            if not _same_settings(run.manifest, manifest.options):
                continue
            members += 1
            for name, quantity in quantities(run.summary(), ignored).items():
                values.setdefault(name, []).append(quantity["value"])
        if members >= 2:
            return {"study": study.study_id, "members": members, "values": values}
    return None


def _chance_bound(sample: list[float], confidence: float) -> float | None:
    """How far two draws from `sample`'s distribution differ at most with `confidence`: t(n-1) * sd * sqrt(2)."""
    if len(sample) < 2:
        return None
    interval = statistics.mean_interval(sample, confidence=confidence, spread="t")
    if interval["stderr"] == 0.0:
        return 0.0
    t_quantile = (interval["high"] - interval["mean"]) / interval["stderr"]
    return t_quantile * interval["stderr"] * math.sqrt(len(sample)) * math.sqrt(2.0)


def _curve_tail(rows: list[dict], key: str) -> list[float]:
    values = [row[key] for row in rows if _number(row.get(key))]
    return [float(value) for value in values[-CURVE_TAIL:]]


def judge(
    original: Mapping[str, dict], reproduction: Mapping[str, dict], spread: dict | None, original_rows: list[dict]
) -> dict:
    """Each quantity of `original` against the reproduction's, by the first yardstick that exists (module docstring)."""
    names = sorted(original)
    confidence = 1.0 - FAMILY_ALPHA / max(len(names), 1)
    entries = []
    for name in names:
        value = original[name]["value"]
        other = (reproduction.get(name) or {}).get("value")
        entry = {"quantity": name, "original": value, "reproduction": other}
        study_values = (spread or {}).get("values", {}).get(name) or []
        tail = _curve_tail(original_rows, name.removeprefix("metric ")) if name.startswith("metric ") else []
        if other is None:
            entry.update(yardstick="missing in the reproduction", within=False)
        elif len(study_values) >= 2:
            bound = _chance_bound(study_values, confidence)
            entry.update(
                yardstick=f"seed spread of study {spread['study']} ({len(study_values)} runs): +-{bound:.4g}",
                within=bool(abs(other - value) <= bound),
            )
        elif original[name]["interval"] is not None:
            low, high = original[name]["interval"]
            entry.update(yardstick=f"the run's interval [{low:.4g}, {high:.4g}]", within=bool(low <= other <= high))
        elif len(tail) >= 2:
            bound = _chance_bound(tail, confidence)
            entry.update(
                yardstick=f"spread of its last {len(tail)} rows: +-{bound:.4g}",
                within=bool(abs(other - value) <= bound),
            )
        else:
            entry.update(yardstick="none", within=None)
        entries.append(entry)
    judged = [entry for entry in entries if entry["within"] is not None]
    consistent = bool(judged) and all(entry["within"] for entry in judged)
    return {
        "verdict": CONSISTENT if consistent else DIVERGED,
        "confidence_each": confidence,
        "study": None if spread is None else spread["study"],
        "quantities": entries,
    }


def _shown(value: float | None) -> str:
    """Ten significant digits: enough to see a difference in the last bits of a float32 sum."""
    return "-" if value is None else f"{value:.10g}"


def format_judgement(judgement: Mapping) -> list[str]:
    """The lines `reproduce` prints under the row comparison."""
    lines = [
        (
            f"  statistical verdict on the outcome ({len(judgement['quantities'])} quantities, each at"
            f" {judgement['confidence_each']:.4g}):"
        )
    ]
    for entry in judgement["quantities"]:
        mark = {True: "within", False: "OUTSIDE", None: "not judged"}[entry["within"]]
        lines.append(
            f"    {entry['quantity']}: {_shown(entry['original'])} -> {_shown(entry['reproduction'])}"
            f"  {mark} ({entry['yardstick']})"
        )
    if not judgement["quantities"]:
        lines.append("    nothing to judge: the run summarised no metric and returned no score")
    return lines
