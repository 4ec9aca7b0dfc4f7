"""How many seeds a study needs: from the seeds so far, the seeds for a 95 % interval of a given width, and
the compute time of the seeds to add, from the members' recorded durations.

    rl-harness study plan 20261205T141746Z-398cbb --width 0.4 [--statistic iqm] [--score "normalised value (greedy)"]

    found = plan.seeds_for_width({0: 0.63, 1: -0.69, 2: -0.17}, width=0.4, statistic="mean")   # {"needed": ...}

The spread of the seeds so far is taken to stay as it is. The mean's t interval is 2 t(0.975, n-1) s / sqrt(n)
wide, so the seeds needed are the least n for which that is at most the width (s the seeds' standard
deviation). A bootstrap interval (median, IQM) narrows as 1 / sqrt(n): the seeds needed are n (w / width)^2,
rounded up, for the interval w wide at the n seeds so far. A study with a long tail (one seed far off) may
need many more seeds than the plan says once that seed is seen; the plan is a lower bound, not a promise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from scipy import stats

from rl.harness.study import statistics
from rl.harness.study.declaration import Study
from rl.harness.study.record import COMPLETED
from rl.harness.study.summary import MemberResult

MIN_SEEDS = 2  # an interval needs two seeds


def seeds_for_width(values_by_seed: Mapping[int, float], *, width: float, statistic: str) -> dict:
    """The interval now (`low`, `high`, `width`, `n`) and the seeds `needed` for one at most `width` wide."""
    if width <= 0:
        raise ValueError(f"width must be positive, got {width}")
    values = [values_by_seed[seed] for seed in sorted(values_by_seed)]
    n = len(values)
    if n < MIN_SEEDS:
        return {"n": n, "needed": None}
    if statistic == "mean":
        found = statistics.mean_interval(values, spread="t")
        value, spread = found["mean"], found["stderr"] * math.sqrt(n)
        needed = MIN_SEEDS
        if spread > 0:  # the normal quantile's answer, then up until the t quantile's interval fits
            needed = max(MIN_SEEDS, math.ceil((2 * stats.norm.ppf(0.975) * spread / width) ** 2))
            while 2 * stats.t.ppf(0.975, needed - 1) * spread / math.sqrt(needed) > width:
                needed += 1
    else:
        found = statistics.bootstrap_interval(values, statistic)
        value = found["value"]
        needed = max(MIN_SEEDS, math.ceil(n * ((found["high"] - found["low"]) / width) ** 2))
    return {
        "n": n,
        "value": value,
        "low": found["low"],
        "high": found["high"],
        "width": found["high"] - found["low"],
        "needed": needed,
    }


def plan(
    study: Study, results: Iterable[MemberResult], *, width: float, statistic: str, scores: list[str] | None = None
) -> dict:
    """Per score and variant: `seeds_for_width`, the seeds to add, the mean compute time of a completed member
    and so the compute time of the seeds to add (None where no member recorded a duration)."""
    results = [result for result in results if result.status == COMPLETED]
    chosen = [score for score in study.scores if scores is None or score.name in scores]
    planned: dict[str, dict[str, dict]] = {}
    for score in chosen:
        by_variant: dict[str, dict[int, float]] = {}
        durations: dict[str, list[float]] = {}
        for result in results:
            variant = result.member.variant
            value = score.read(result.outcome())
            if value is not None:
                by_variant.setdefault(variant, {})[result.member.seed] = value
            if result.duration_seconds is not None:
                durations.setdefault(variant, []).append(result.duration_seconds)
        planned[score.name] = {}
        for variant, values in by_variant.items():
            found = seeds_for_width(values, width=width, statistic=statistic)
            more = None if found["needed"] is None else max(0, found["needed"] - found["n"])
            member_s = sum(durations[variant]) / len(durations[variant]) if durations.get(variant) else None
            planned[score.name][variant] = {
                **found,
                "more": more,
                "member_s": member_s,
                "more_s": None if more is None or member_s is None else more * member_s,
            }
    return {"width": width, "statistic": statistic, "scores": planned}


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def markdown(study_id: str, found: dict) -> str:
    """The plan as one table per score."""
    name = statistics.STATISTIC_NAMES[found["statistic"]]
    interval = "t" if found["statistic"] == "mean" else "bootstrap"
    lines = [
        (
            f"study {study_id}: seeds for a 95 % {interval} interval of the {name} at most {found['width']:g} wide,"
            " if the seeds' spread stays as it is so far; compute time from the members' recorded durations"
            " (one member after another)."
        )
    ]
    for score, by_variant in found["scores"].items():
        lines += [
            "",
            f"{score}:",
            "",
            (
                f"| agent | seeds | {name} [95 % interval] | width | seeds needed | more seeds |"
                " a member's compute time | the more seeds' |"
            ),
            "|---" * 8 + "|",
        ]
        for variant, entry in by_variant.items():
            if entry["needed"] is None:
                lines.append(
                    f"| {variant} | {entry['n']} | - | - | - (an interval needs {MIN_SEEDS} seeds) | - | - | - |"
                )
                continue
            lines.append(
                f"| {variant} | {entry['n']} | {entry['value']:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"
                f" | {entry['width']:.3f} | {entry['needed']} | {entry['more']} |"
                f" {_hours(entry['member_s'])} | {_hours(entry['more_s'])} |"
            )
        total = [entry["more_s"] for entry in by_variant.values() if entry.get("more_s") is not None]
        if total:
            lines.append(
                f"| all | | | | | {sum(entry['more'] or 0 for entry in by_variant.values())} | | {_hours(sum(total))} |"
            )
    return "\n".join(lines) + "\n"
