"""Statistics over seeds: means with t intervals, and bootstrap intervals of the mean, the median and the
interquartile mean (IQM); the probability that one agent's seed beats another's; score distributions.

    from rl.harness.study import statistics

    statistics.mean_interval([0.8, 0.2, 0.5], spread="t")    # {"mean", "low", "high", "stderr", "n", ...}
    statistics.mean_interval_or_point([0.8])                 # one seed: a point, not an error
    statistics.over_seeds({0: 0.8, 1: 0.2, 2: 0.5})          # the t interval and, under "bootstrap", every statistic
    statistics.bootstrap_interval([0.8, 0.2, 0.5, 0.1], "iqm")           # {"value", "low", "high"}
    statistics.paired_difference({0: 0.8, 1: 0.2}, {0: 0.5, 1: 0.1})   # a - b over the shared seeds
    statistics.probability_of_improvement([0.8, 0.2], [0.5, 0.1])      # P(a > b), ties half, with its interval
    statistics.fraction_above([0.8, 0.2, 0.5], [0.0, 0.5])             # the score distribution, with bands

RL seeds are few and often bimodal or heavy-tailed, so beside the mean's t interval stand the robust
statistics of Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (NeurIPS 2021), as
its library rliable computes them: the IQM (the mean of the middle half, `scipy.stats.trim_mean`
cutting a quarter from each end), the median, and the probability of improvement (the Mann-Whitney
U statistic over all pairs of seeds, divided by their number), each with a percentile bootstrap
interval. rliable's bootstrap is stratified by task; a score here is one task, so its strata are
the agent's seeds (and, for a pair, each agent's seeds resampled on their own). Every interval draws
its resamples from a generator seeded with `BOOTSTRAP_SEED`: a summary is reproducible, and one
agent's interval does not change when another agent joins the study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

BOOTSTRAP_SEED = 0
RESAMPLES = 10_000
CONFIDENCE = 0.95


def interquartile_mean(values, axis=None):
    """The mean of the middle half: a quarter (rounded down) of the values cut from each end."""
    return stats.trim_mean(values, proportiontocut=0.25, axis=axis)


# Each reduces the last axis: one statistic per bootstrap resample (a row).
STATISTICS = {
    "mean": lambda values: np.mean(values, axis=-1),
    "median": lambda values: np.median(values, axis=-1),
    "iqm": lambda values: interquartile_mean(values, axis=-1),
}
STATISTIC_NAMES = {"mean": "mean", "median": "median", "iqm": "IQM"}  # as tables print them


def bootstrap_description() -> dict:
    """What a summary records of its bootstrap, so that its intervals can be drawn again."""
    return {
        "seed": BOOTSTRAP_SEED,
        "resamples": RESAMPLES,
        "confidence": CONFIDENCE,
        "interval": "percentile",
        "strata": "seeds of each agent",
    }


def _generator() -> np.random.Generator:
    return np.random.default_rng(BOOTSTRAP_SEED)


def _percentiles(estimates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(estimates, [tail, 1.0 - tail], axis=0)
    return low, high


def _resample_counts(size: int, generator: np.random.Generator, resamples: int) -> np.ndarray:
    """(resamples, size): how often each value is drawn in each resample of `size` draws with replacement."""
    return generator.multinomial(size, np.full(size, 1.0 / size), size=resamples)


def bootstrap_interval(
    values: Sequence[float], statistic: str, *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> dict:
    """`statistic` (mean, median or iqm) of `values` with its percentile bootstrap interval; one value is a point."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic {statistic!r}; expected one of {', '.join(STATISTICS)}")
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) < 1:
        raise ValueError(f"bootstrap_interval needs a 1-D sample of at least 1 value, got shape {values.shape}")
    value = float(STATISTICS[statistic](values))
    if len(values) == 1:
        return {"value": value, "low": value, "high": value}
    drawn = values[_generator().integers(0, len(values), size=(resamples, len(values)))]
    low, high = _percentiles(STATISTICS[statistic](drawn), confidence)
    return {"value": value, "low": float(low), "high": float(high)}


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
    return {
        "mean": mean,
        "low": mean - quantile * stderr,
        "high": mean + quantile * stderr,
        "stderr": stderr,
        "n": len(values),
        "confidence": confidence,
        "spread": spread,
    }


def mean_interval_or_point(values: Sequence[float], **options) -> dict:
    """`mean_interval`, except that a single value is a point (low = high = mean, n 1), e.g. a smoke run's."""
    values = [float(value) for value in values]
    if len(values) == 1:
        return {"mean": values[0], "low": values[0], "high": values[0], "stderr": 0.0, "n": 1}
    return mean_interval(values, **options)


def over_seeds(values_by_seed: Mapping[int, float]) -> dict:
    """The mean's t interval over seeds and, under `bootstrap`, each statistic's bootstrap interval, with each
    seed's value (`values`, by seed) kept beside them."""
    seeds = sorted(values_by_seed)
    values = [values_by_seed[seed] for seed in seeds]
    return {
        **mean_interval_or_point(values, spread="t"),
        "bootstrap": {statistic: bootstrap_interval(values, statistic) for statistic in STATISTICS},
        "values": {str(seed): float(values_by_seed[seed]) for seed in seeds},
    }


def paired_difference(a: Mapping[int, float], b: Mapping[int, float]) -> dict:
    """`a - b` seed by seed over the seeds both have (training seeds pair the two agents), with its intervals."""
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(
            f"no seed in common (seeds {sorted(a)} vs {sorted(b)}): a paired difference needs shared seeds"
        )
    return {**over_seeds({seed: a[seed] - b[seed] for seed in shared}), "seeds": shared}


def _wins(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)): 1 where a's value beats b's, 1/2 for a tie, 0 where it loses."""
    return (a[:, None] > b[None, :]) + 0.5 * (a[:, None] == b[None, :])


def probability_of_improvement(
    a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> dict:
    """P(a > b): the chance that a seed of `a` scores above a seed of `b`, ties counting half, over every pair of
    their seeds, with a percentile bootstrap interval (each agent's seeds resampled on their own)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or not len(a) or not len(b):
        raise ValueError(f"probability_of_improvement needs two 1-D samples, got shapes {a.shape} and {b.shape}")
    wins = _wins(a, b)
    value = float(wins.mean())
    found = {"value": value, "low": value, "high": value, "n": [len(a), len(b)]}
    if len(a) * len(b) > 1:
        generator = _generator()
        counts_a = _resample_counts(len(a), generator, resamples)
        counts_b = _resample_counts(len(b), generator, resamples)
        # Each resample's wins, weighted by how often it drew each seed: count_a @ wins @ count_b.
        estimates = ((counts_a @ wins) * counts_b).sum(axis=1) / (len(a) * len(b))
        low, high = _percentiles(estimates, confidence)
        found.update(low=float(low), high=float(high))
    return found


def fraction_above(
    values: Sequence[float], thresholds: Sequence[float], *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> dict:
    """The score distribution: at each threshold, the fraction of seeds scoring above it, with a percentile
    bootstrap band (Agarwal et al.'s performance profile for one task)."""
    values, thresholds = np.asarray(values, dtype=np.float64), np.asarray(thresholds, dtype=np.float64)
    above = (values[:, None] > thresholds[None, :]).astype(np.float64)  # (seeds, thresholds)
    fraction = above.mean(axis=0)
    if len(values) == 1:
        return {"fraction": fraction, "low": fraction, "high": fraction}
    estimates = _resample_counts(len(values), _generator(), resamples) @ above / len(values)
    low, high = _percentiles(estimates, confidence)
    return {"fraction": fraction, "low": low, "high": high}
