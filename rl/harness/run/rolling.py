"""When a run refreshes its one latest-state ("rolling") checkpoint, so that a crash loses little.

    cadence = RollingCadence(minutes=10, budget_fraction=0.1)    # the defaults; --rolling-checkpoint-* flags
    clock = RollingClock(cadence)
    clock.restart(trial=None, progress=0.0)     # training (re)starts, or a checkpoint was just saved (save_s=...)
    clock.due(trial=None, progress=0.13)        # True: 10 % of the budget passed since the last save

A run then loses at most `minutes` of training and at most `budget_fraction` of its budget (plus
the iteration under way) to a crash: resume starts from the newest checkpoint, rolling or not.
The saves' cost is capped too: a rolling save waits until the training since the previous save (or
since training started) is at least `s / MAX_COST_SHARE` seconds, `s` being what the line's last
save took (ASSUMED_SAVE_S before any was timed), so rolling saves take at most 0.25 % of the
training time. The cap binds only where a tenth of the budget trains in less time than that (about
10 s for the Mess3 main job's 25-50 ms saves: runs far shorter than it), and there it loses less
than a minute.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

DEFAULT_MINUTES = 10.0
DEFAULT_BUDGET_FRACTION = 0.1
# Rolling saves may take this share of the training time at most: the harness's whole bookkeeping
# stays within 1 % of an iteration (bench_harness_overhead: 0.75 %, docs/performance.md).
MAX_COST_SHARE = 0.0025
# What a save is taken to cost until one of the line is timed: the Mess3 main job's saves take 25-50 ms
# (a CartPole MLP's ~10 ms), so a run's first rolling save comes after at least 10 s of training.
ASSUMED_SAVE_S = 0.025


@dataclasses.dataclass(frozen=True)
class RollingCadence:
    """After `minutes` of training or `budget_fraction` of the budget since the last save, whichever comes first."""

    minutes: float = DEFAULT_MINUTES
    budget_fraction: float = DEFAULT_BUDGET_FRACTION

    def __post_init__(self):
        if not (math.isfinite(self.minutes) and self.minutes > 0):
            raise ValueError(f"a rolling checkpoint every {self.minutes!r} minutes: give a positive number")
        if not (math.isfinite(self.budget_fraction) and 0 < self.budget_fraction <= 1):
            raise ValueError(
                f"a rolling checkpoint every {self.budget_fraction!r} of the budget: give a fraction"
                " in (0, 1], e.g. 0.1"
            )

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class RollingClock:
    """Tracks, per line of checkpoints (None or a trial name), the time and budget share of its last save."""

    def __init__(self, cadence: RollingCadence, clock: Callable[[], float] = time.monotonic):
        self.cadence = cadence
        self._clock = clock
        self._marks: dict[str | None, tuple[float, float, float]] = {}
        self._save_s: dict[str | None, float] = {}  # per line: what its last timed save took

    def restart(self, trial: str | None, progress: float, save_s: float | None = None) -> None:
        """Counts from now: a line starts training (`save_s` None), or it saved (a checkpoint of either kind, in `save_s`)."""
        if save_s is not None:
            self._save_s[trial] = save_s
        now = self._clock()
        self._marks[trial] = (now, progress, now + self._save_s.get(trial, ASSUMED_SAVE_S) / MAX_COST_SHARE)

    def due(self, trial: str | None, progress: float) -> bool:
        if trial not in self._marks:
            self.restart(trial, progress)
            return False
        at, done, earliest = self._marks[trial]
        now = self._clock()
        if now < earliest:
            return False
        return now - at >= 60 * self.cadence.minutes or progress - done >= self.cadence.budget_fraction - 1e-9
