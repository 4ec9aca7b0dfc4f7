"""A run's metrics as they are logged: rows appended to metrics.jsonl, TensorBoard events written after
each, and the curves of summary.json.

    stream = MetricsStream(results_dir=..., artifacts_dir=..., run_id=run_id)
    stream.open(events_folder)                 # metrics.jsonl and the TensorBoard events file
    flat = stream.append({"training_iteration": 1, "env_runners": {"episode_return_mean": 21.0}})
    stream.summarize("fake/loss")              # one more curve in summary.json
    stream.write_summary()
    stream.close()

Not thread-safe on its own: its owner (`RunSession`) calls it under the run's lock.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Mapping
from typing import Any

from rl.harness.run import metric_keys, records, tensorboard_events
from rl.harness.run.rows import downsample, flatten_scalars
from rl.harness.run.status import utc_now

CURVE_POINTS = 100
# summary.json keeps its own shape (unchanged by the manifest's schema 2).
SUMMARY_SCHEMA_VERSION = 1
# Curves every summary carries when present (RLlib's names); recipes add theirs via summarize().
DEFAULT_SUMMARY_KEYS = (
    metric_keys.RETURN,
    metric_keys.EPISODE_LENGTH,
    metric_keys.ENV_STEPS,
    metric_keys.ITERATION_SECONDS,
)
X_KEY = metric_keys.ITERATION


def curve_summary(curves: Mapping[str, list]) -> dict:
    """summary.json's `metrics`: per key its last, min and max and a downsampled curve of [x, y] points."""
    summary = {}
    for key, points in sorted(curves.items()):
        finite = [y for _, y in points if y is not None and math.isfinite(y)]
        summary[key] = {
            "last": points[-1][1],
            "min": min(finite) if finite else None,
            "max": max(finite) if finite else None,
            "points": len(points),
            "curve": downsample(points, CURVE_POINTS),
        }
    return summary


def curves_of_rows(rows: list[dict], keys) -> dict[str, list]:
    """The [x, y] points of each of `keys` in metrics rows, as the stream collects them while it runs."""
    curves: dict[str, list] = {}
    for number, row in enumerate(rows, start=1):
        x = row.get(X_KEY, number)
        for key in keys:
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                curves.setdefault(key, []).append([x, value])
    return curves


class MetricsStream:
    """One run's metrics rows, their TensorBoard view and the summary's curves (per Tune trial apart)."""

    def __init__(self, *, results_dir: pathlib.Path, artifacts_dir: pathlib.Path, run_id: str):
        self._results_dir = results_dir
        self._artifacts_dir = artifacts_dir
        self._run_id = run_id
        # One set, shared with the events' headline: keys summarized later are headlined too.
        self._summary_keys = set(DEFAULT_SUMMARY_KEYS)
        self._curves: dict[str, dict[str, list]] = {}  # group ("" or a Tune trial id) -> key -> [[x, y]]
        self._sections: dict[str, Any] = {}
        self._rows = 0
        self._metrics: records.JsonLinesWriter | None = None
        self._events: tensorboard_events.ScalarEvents | None = None

    def open(self, events_folder: pathlib.Path) -> None:
        self._metrics = records.JsonLinesWriter(str(self._artifacts_dir / records.METRICS_FILE))
        self._events = tensorboard_events.ScalarEvents(events_folder, self._run_id, headline=self._summary_keys)

    def append(self, row: dict, *, trial: str | None = None) -> dict:
        """Appends one row to metrics.jsonl, then to the events and the curves; returns it flattened (`a/b` keys)."""
        flat = flatten_scalars(row)
        self._rows += 1
        flat.setdefault("harness/row", self._rows)
        flat.setdefault("harness/logged_at", utc_now())
        self._metrics.append(flat)
        self._events.write(flat, trial=trial)  # after the record: a failed view costs no row
        group = self._curves.setdefault(trial or "", {})
        x = flat.get(X_KEY, self._rows)
        for key in self._summary_keys:
            value = flat.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                group.setdefault(key, []).append([x, value])
        return flat

    def summarize(self, *keys: str) -> None:
        self._summary_keys.update(keys)

    def set_section(self, name: str, value: Any) -> None:
        self._sections[name] = value

    def write_summary(self) -> None:
        summary = {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "run_id": self._run_id,
            "rows": self._rows,
            "x": X_KEY,
            "metrics": curve_summary(self._curves.get("", {})),
            **self._sections,
        }
        per_trial = {group: curve_summary(curves) for group, curves in self._curves.items() if group}
        if per_trial:
            summary["trial_metrics"] = per_trial
        records.write_json_atomically(str(self._results_dir / records.SUMMARY_FILE), summary)

    def sync(self) -> None:
        """Flushes metrics.jsonl to disk (at each checkpoint: the rows a checkpoint reflects survive a crash)."""
        self._metrics.sync()

    def close(self) -> None:
        if self._metrics is not None:
            self._metrics.close()
            self._events.close()
