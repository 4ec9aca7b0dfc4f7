"""SIGINT and SIGTERM as a run's stop request: the first lets the iteration finish, a second stops at once.

signals = StopSignals(verbosity=logging.get_verbosity())
signals.reclaim()                    # the handlers (again after ray.init, which takes SIGTERM) and absl logging
if signals.requested: ...            # a signal arrived, or `request()` was called (a reached budget cap)
with signals.stop_at_once():         # work that cannot poll `requested` (the upload)
    upload()                         # a signal raises KeyboardInterrupt here
signals.restore()                    # the handlers from before
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from absl import logging

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _cancel_failure_alarm() -> None:
    """Cancels the abort that a C++ failure-signal handler which saw this signal first has scheduled.

    ray.init installs absl's failure handler for SIGTERM, among others, before `reclaim` takes
    SIGTERM back: a SIGTERM in that window went through it, and it arms alarm(3) with an
    immediate-abort SIGALRM handler, so the run died (SIGABRT) 3 s into its graceful stop. The
    harness uses no alarm of its own; SIGALRM gets back the handler Python knows (the default).
    """
    signal.alarm(0)
    known = signal.getsignal(signal.SIGALRM)  # None: set outside Python, so not the harness's
    signal.signal(signal.SIGALRM, signal.SIG_DFL if known is None else known)


class StopSignals:
    """One run's stop request: set by the first SIGINT/SIGTERM (or by `request`), read between iterations."""

    def __init__(self, *, verbosity: int):
        self._verbosity = verbosity
        self._requested = threading.Event()
        self._signal: str | None = None
        self._previous_handlers: dict[int, Any] = {}
        self._stop_at_once = False

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    @property
    def stop_signal(self) -> str | None:
        """The name of the signal that asked the run to stop (None: none arrived)."""
        return self._signal

    def request(self) -> None:
        """Asks the run to stop after this iteration without a signal (a reached budget cap)."""
        self._requested.set()

    def reclaim(self) -> None:
        """(Re)installs the SIGINT/SIGTERM handlers and absl logging.

        Runners call it after `ray.init`, which takes SIGTERM; importing RLlib raises the root
        logger's level to ERROR, which would silence the progress lines.
        """
        logging.use_absl_handler()
        logging.set_verbosity(self._verbosity)
        if threading.current_thread() is not threading.main_thread():
            logging.warning("not on the main thread: SIGINT/SIGTERM will not stop the run gracefully")
            return
        for number in STOP_SIGNALS:
            previous = signal.signal(number, self._on_signal)
            self._previous_handlers.setdefault(number, previous)

    @contextlib.contextmanager
    def stop_at_once(self) -> Iterator[None]:
        """SIGINT/SIGTERM raise KeyboardInterrupt inside the block, and become the run's `stop_signal`."""
        self._stop_at_once = True
        self.reclaim()
        try:
            yield
        finally:
            self._stop_at_once = False
            self.restore()

    def restore(self) -> None:
        """Gives SIGINT/SIGTERM back to the handlers they had before `reclaim`."""
        if threading.current_thread() is threading.main_thread():
            for number, handler in self._previous_handlers.items():
                signal.signal(number, handler)
        self._previous_handlers.clear()

    def _on_signal(self, number: int, frame) -> None:
        name = signal.Signals(number).name
        _cancel_failure_alarm()
        if self._stop_at_once:
            self._signal = self._signal or name
            logging.warning("%s: stopping now", name)
            raise KeyboardInterrupt(name)
        if self._signal is not None:  # a second signal (after a reached budget cap, the first one is graceful)
            logging.warning("%s again: stopping now, without a final checkpoint", name)
            raise KeyboardInterrupt(name)
        self._signal = name
        self._requested.set()
        logging.warning("%s: finishing this iteration, then a final checkpoint (send it again to stop now)", name)
