"""The largest resident memory of a process and everything it started, together (Linux /proc).

    from experiments.mess3.benchmarks import process_memory

    with process_memory.TreeMemory() as memory:     # samples every 0.2 s in a thread
        train()                                     # e.g. a run whose Ray workers sample
    memory.peak_mib                                 # resident memory summed over the processes
    memory.peak_pss_mib                             # proportional: each shared page split among its processes

`resource.getrusage` sees this process (and waited-for children) only; Ray's processes and its
remote EnvRunners are started by Ray's own daemons below this process, so a run's whole memory is
the sum over its process tree, sampled while it runs. Summed resident memory counts a page
that several processes map (the libraries' code, Ray's object store, pages a fork shares) once
in each; the proportional set size (PSS) splits it among them, so its sum is what the tree takes
from the machine.
"""

from __future__ import annotations

import os
import threading


class TreeMemory:
    """The largest resident memory of this process and all its descendants together, sampled in a thread (Linux)."""

    def __init__(self, period_s: float = 0.2):
        self.peak_mib = 0.0
        self.peak_pss_mib = 0.0
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
            sizes = [_resident_kib(pid) for pid in _descendants(os.getpid())]
            self.peak_mib = max(self.peak_mib, sum(rss for rss, _ in sizes) / 1024)
            self.peak_pss_mib = max(self.peak_pss_mib, sum(pss for _, pss in sizes) / 1024)


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


def _resident_kib(pid: int) -> tuple[int, int]:
    """(resident, proportional) set size of `pid` in KiB; (0, 0) once it has ended."""
    sizes = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                key, *value = line.split()
                if key in ("Rss:", "Pss:"):
                    sizes[key] = int(value[0])
    except (OSError, ValueError):
        return 0, 0
    return sizes.get("Rss:", 0), sizes.get("Pss:", 0)
