"""Metrics rows: the counters budgets are counted in, a run's leading rows up to a bound, curves, flattening.

from rl.harness.run import rows

budget = rows.RowBudget.of(iterations=2, env_steps=None)
rows.flatten_scalars({"a": {"b": 1.0}})          # {"a/b": 1.0}
rows.downsample(points, 100)                     # at most 100, first and last kept
"""

from __future__ import annotations

import dataclasses

from rl.harness.run import metric_keys

# The counters every metrics row carries (RLlib's names), which budgets are counted in.
ITERATION_KEY, ENV_STEPS_KEY = metric_keys.ITERATION, metric_keys.ENV_STEPS


@dataclasses.dataclass(frozen=True)
class RowBudget:
    """A run's leading rows up to a counter bound: up to iteration N, or up to N env steps (or all).

    budget = RowBudget.of(iterations=2, env_steps=None)
    budget.take(rows)          # the rows up to and including the first with training_iteration >= 2
    budget.reached(row)        # whether a run capped at it stops after `row`
    budget.run_flags()         # ["--stop-at-iteration", "2"]: the CLI option that caps a run at it
    """

    key: str | None = None
    bound: int | None = None

    @staticmethod
    def of(iterations: int | None, env_steps: int | None) -> RowBudget:
        if iterations is not None:
            return RowBudget(ITERATION_KEY, iterations)
        return RowBudget(ENV_STEPS_KEY, env_steps) if env_steps is not None else RowBudget()

    def reached(self, row: dict) -> bool:
        return self.key is not None and (row.get(self.key) or 0) >= self.bound

    def progress(self, row: dict) -> float:
        """How far `row` is toward the bound, 0 to 1 (0 without one)."""
        return 0.0 if self.key is None else min(1.0, (row.get(self.key) or 0) / self.bound)

    def take(self, rows: list[dict]) -> list[dict]:
        kept = []
        for row in rows:
            kept.append(row)
            if self.reached(row):
                break
        return kept

    def run_flags(self) -> list[str]:
        if self.key is None:
            return []
        return ["--stop-at-iteration" if self.key == ITERATION_KEY else "--stop-at-env-steps", str(self.bound)]


def downsample(points: list, limit: int) -> list:
    """At most `limit` evenly spaced points, always keeping the first and the last."""
    if len(points) <= limit:
        return list(points)
    step = (len(points) - 1) / (limit - 1)
    return [points[round(index * step)] for index in range(limit)]


def flatten_scalars(nested: dict, prefix: str = "") -> dict:
    """`{"a": {"b": 1.0}, "c": [..]}` -> `{"a/b": 1.0}`: numbers, bools and strings only."""
    flat = {}
    for key, value in nested.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_scalars(value, name + "/"))
        elif isinstance(value, (bool, int, float, str)) or value is None:
            flat[name] = value
        elif hasattr(value, "item") and getattr(value, "shape", None) == ():
            flat[name] = value.item()  # numpy / torch scalars
    return flat
