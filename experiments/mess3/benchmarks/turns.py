"""Turns between processes: each runs an iteration only while the others wait, one after another.

    from experiments.mess3.benchmarks import turns

    table = turns.Table(2, multiprocessing.get_context("spawn"))   # in the parent
    # pass table.seat(0) and table.seat(1) to the two processes (a Pool's initargs), then in each:
    seat.take()          # at the start of every iteration: ends this seat's last turn, waits for its next
    seat.leave()         # when done (also after a failure): the others go on without it
    seat.waited_within(first, last)   # seconds spent waiting between two time.time() stamps

Two benchmark parts timed one after another meet different minutes of a shared machine, whose
speed drifts within seconds (docs/performance.md, How to measure); taking turns iteration by
iteration, each part's iterations meet the same seconds as the other's, while only one of them
trains at a time. A turn runs from one `take()` to the next, so whatever a part does between
iterations (records, checkpoints) is inside its turns; the waits are not, and each part takes
them out of its own timing.
"""

from __future__ import annotations

import time
from typing import Any

# A turn longer than this means the process holding it stopped without leaving.
TURN_TIMEOUT_S = 600.0


class Table:
    """The shared state of one set of turns: whose turn it is, who still takes part, and each seat's signal.

    A turn is handed over by releasing the next seat's semaphore, which never waits on anyone: a
    process killed while it waits for its turn holds up no other (a shared Condition's notify
    waits for every sleeper it wakes, a dead one included, so it would).
    """

    def __init__(self, seats: int, context: Any):
        if seats < 1:
            raise ValueError(f"a table needs at least one seat, got {seats}")
        self._lock = context.Lock()  # over the turn and the present seats, held for microseconds
        self._turn = context.Value("i", 0, lock=False)
        self._present = context.Array("b", [1] * seats, lock=False)
        self._signals = [context.Semaphore(1 if index == 0 else 0) for index in range(seats)]

    def seat(self, index: int) -> Seat:
        """The seat of the `index`-th process (seat 0 has the first turn)."""
        if not 0 <= index < len(self._present):
            raise ValueError(f"seat {index} is not at a table of {len(self._present)}")
        return Seat(self._lock, self._turn, self._present, self._signals, index)


class Seat:
    """One process's place in the turns; built by `Table.seat` and handed to the process at its start."""

    def __init__(self, lock: Any, turn: Any, present: Any, signals: list, index: int):
        self._lock, self._turn, self._present, self._signals, self.index = lock, turn, present, signals, index
        self._holding = False
        self.waits: list[tuple[float, float]] = []  # (start, end) of each wait, time.time()

    def take(self, timeout_s: float = TURN_TIMEOUT_S, hint: str = "") -> None:
        """Ends this seat's current turn, if it holds one, and waits for its next; `hint` ends a timeout's message."""
        if self._holding:
            with self._lock:
                self._pass()
        started = time.time()
        if not self._signals[self.index].acquire(timeout=timeout_s):
            raise TimeoutError(
                f"seat {self.index} waited {timeout_s:.0f} s for its turn: the process holding it stopped "
                f"without leaving{'; ' + hint if hint else ''}"
            )
        self.waits.append((started, time.time()))
        self._holding = True

    def leave(self) -> None:
        """Takes this seat out of the turns (passing its turn on, if it holds one); idempotent.

        Another process may leave for it (a benchmark's parent, for a part that died)."""
        with self._lock:
            self._present[self.index] = 0
            if self._turn.value == self.index:  # held, or handed to it and not yet taken
                self._pass()

    def waited_within(self, first: float, last: float) -> float:
        """Seconds of the waits that ended after `first` and at or before `last` (time.time() stamps)."""
        return sum(end - start for start, end in self.waits if first < end <= last)

    def _pass(self) -> None:
        """Hands the turn to the next seat still present (this one again when it is alone); the lock is held."""
        seats = len(self._present)
        for step in range(1, seats + 1):
            candidate = (self.index + step) % seats
            if self._present[candidate]:
                self._turn.value = candidate
                self._signals[candidate].release()
                break
        self._holding = False
