"""Means with 95 % intervals: over many samples (episodes, a normal interval) or few (seeds, Student's t).

    from rl.harness.study import statistics

    statistics.mean_interval([0.8, 0.2, 0.5], spread="t")    # {"mean", "low", "high", "stderr", "n", ...}
    statistics.mean_interval_or_point([0.8])                 # one seed: a point, not an error
    statistics.paired_difference({0: 0.8, 1: 0.2}, {0: 0.5, 1: 0.1})   # a - b over the shared seeds
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
from scipy import stats


def mean_interval(values: Sequence[float], *, confidence: float = 0.95, spread: str = "normal") -> dict:
    """Mean with a two-sided interval: `normal` (many samples, e.g. episodes) or `t` (few, e.g. seeds)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"mean_interval needs a 1-D sample of at least 2 values, got shape {values.shape}")
    if spread not in ("normal", "t"):
        raise ValueError(f"spread={spread!r}; expected 'normal' (many samples) or 't' (few)")
    mean, stderr = float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))
    tail = (1.0 + confidence) / 2.0
    quantile = stats.norm.ppf(tail) if spread == "normal" else stats.t.ppf(tail, df=len(values) - 1)
    return {"mean": mean, "low": mean - quantile * stderr, "high": mean + quantile * stderr, "stderr": stderr,
            "n": int(len(values)), "confidence": confidence, "spread": spread}


def mean_interval_or_point(values: Sequence[float], **options) -> dict:
    """`mean_interval`, except that a single value is a point (low = high = mean, n 1), e.g. a smoke run's."""
    values = [float(value) for value in values]
    if len(values) == 1:
        return {"mean": values[0], "low": values[0], "high": values[0], "stderr": 0.0, "n": 1}
    return mean_interval(values, **options)


def over_seeds(values_by_seed: Mapping[int, float]) -> dict:
    """The t interval over seeds, with each seed's value (`values`, by seed) kept beside it."""
    seeds = sorted(values_by_seed)
    return {**mean_interval_or_point([values_by_seed[seed] for seed in seeds], spread="t"),
            "values": {str(seed): float(values_by_seed[seed]) for seed in seeds}}


def paired_difference(a: Mapping[int, float], b: Mapping[int, float]) -> dict:
    """`a - b` seed by seed over the seeds both have (training seeds pair the two agents), with its t interval."""
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(f"no seed in common (seeds {sorted(a)} vs {sorted(b)}): a paired difference needs shared seeds")
    return {**over_seeds({seed: a[seed] - b[seed] for seed in shared}), "seeds": shared}
