"""A dependency-free progress bar on stderr for long collections.

    from rl.analysis.progress import ProgressBar

    with ProgressBar(total=88572, label="contexts", enabled=show_progress) as bar:
        for batch in batches:
            ...
            bar.advance(len(batch))

On a terminal it redraws one line. In a log (stderr not a tty) it writes one line when the stage
ends, and before that at most one per tenth of the work, only once LOG_EVERY_S have passed since
the last: a short stage is one line, a long one shows it is alive, and `bazel run` logs stay readable.
"""

from __future__ import annotations

import sys
import time
from typing import IO

_WIDTH = 30
_REDRAW_EVERY_S = 0.2
LOG_EVERY_S = 30.0  # in a log: the least time between two lines of one unfinished stage


class ProgressBar:
    def __init__(self, *, total: int, label: str, enabled: bool = True, stream: IO[str] | None = None):
        if total < 1:
            raise ValueError(f"a progress bar needs total >= 1, got {total}")
        self.total, self.label = total, label
        self.done = 0
        self.enabled = enabled
        self._stream = stream or sys.stderr
        self._interactive = self._stream.isatty()
        self._started = time.monotonic()
        self._last_drawn = -float("inf") if self._interactive else self._started
        self._last_tenth = -1
        self._ended = False

    def advance(self, amount: int = 1) -> None:
        self.done = min(self.done + amount, self.total)
        if not self.enabled:
            return
        now = time.monotonic()
        tenth = 10 * self.done // self.total
        if self._interactive and (now - self._last_drawn >= _REDRAW_EVERY_S or self.done == self.total):
            self._stream.write("\r" + self.line())
            self._last_drawn = now
        elif not self._interactive and self.done == self.total:
            self._end()
        elif not self._interactive and tenth > self._last_tenth and now - self._last_drawn >= LOG_EVERY_S:
            self._stream.write(self.line() + "\n")
            self._last_tenth, self._last_drawn = tenth, now
        self._stream.flush()

    def _end(self) -> None:
        """In a log: the stage's one closing line (complete, or how far it got when it stopped)."""
        if not self._ended:
            self._stream.write(self.line() + "\n")
            self._ended = True

    def line(self) -> str:
        fraction = self.done / self.total
        elapsed = time.monotonic() - self._started
        remaining = elapsed * (1 - fraction) / fraction if fraction else float("nan")
        filled = int(_WIDTH * fraction)
        return (
            f"{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {100 * fraction:3.0f}% "
            f"{self.done}/{self.total} {elapsed:.1f} s elapsed, {remaining:.1f} s left"
        )

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        if self._interactive:
            self._stream.write("\n")
        else:
            self._end()
        self._stream.flush()
