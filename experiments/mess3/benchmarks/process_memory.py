"""The largest resident memory of a process and everything it started, together (Linux /proc).

    from experiments.mess3.benchmarks import process_memory

    with process_memory.TreeMemory() as memory:     # samples every 0.2 s in a thread
        train()                                     # e.g. a run whose Ray workers sample
    memory.peak_mib

`resource.getrusage` sees this process (and waited-for children) only; Ray's processes and its
remote EnvRunners are started by Ray's own daemons below this process, so a run's whole memory is
the sum over its process tree, sampled while it runs.
"""

from __future__ import annotations

import os
import threading


class TreeMemory:
    """The largest resident memory of this process and all its descendants together, sampled in a thread (Linux)."""

    def __init__(self, period_s: float = 0.2):
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(period_s,), daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            self.peak_mib = max(self.peak_mib, sum(_rss_kib(pid) for pid in _descendants(os.getpid())) / 1024)


def _descendants(root: int) -> list[int]:
    """`root` and every process below it, from /proc's parent ids."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # ended meanwhile
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0
