"""The largest resident memory of a process and everything it started, together (Linux /proc).

    from experiments.mess3.benchmarks import process_memory

    with process_memory.TreeMemory() as memory:     # a watcher process samples every 0.2 s
        train()                                     # e.g. a run whose Ray workers sample
    memory.peak_mib                                 # resident memory summed over the processes
    memory.peak_pss_mib                             # proportional: each shared page split among its processes

`resource.getrusage` sees this process (and waited-for children) only; Ray's processes and its
remote EnvRunners are started by Ray's own daemons below this process, so a run's whole memory is
the sum over its process tree, sampled while it runs. Summed resident memory counts a page
that several processes map (the libraries' code, Ray's object store, pages a fork shares) once
in each; the proportional set size (PSS) splits it among them, so its sum is what the tree takes
from the machine.

The sampling runs in a watcher process of its own (left out of the sums), not in a thread of the
process it measures: a pass over a Ray run's tree takes ~20 ms, most of it reading each
process's page summary, which every 0.2 s would take a tenth of a core and the GIL from the
training it measures (docs/performance.md, How to measure).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

# A watcher that takes longer than this to end once asked has hung: it is killed.
WATCHER_TIMEOUT_S = 30.0


class TreeMemory:
    """The largest resident memory of this process and all its descendants together, sampled by a watcher (Linux)."""

    def __init__(self, period_s: float = 0.2):
        self.peak_mib = 0.0
        self.peak_pss_mib = 0.0
        self._period_s = period_s
        self._watcher: subprocess.Popen | None = None

    def __enter__(self) -> TreeMemory:
        self._watcher = subprocess.Popen(
            [sys.executable, "-c", _WATCH, str(os.getpid()), str(self._period_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)},
        )
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            output, _ = self._watcher.communicate(timeout=WATCHER_TIMEOUT_S)  # closing its input ends the watch
        except subprocess.TimeoutExpired:
            self._watcher.kill()
            self._watcher.communicate()
            output = ""
        if self._watcher.returncode != 0 or len(output.split()) != 2:
            raise RuntimeError(
                f"the memory watcher failed (exit status {self._watcher.returncode}, output {output.strip()!r}); "
                "its error is on stderr above"
            )
        self.peak_mib, self.peak_pss_mib = (float(value) for value in output.split())


# The watcher: samples the tree under argv[1] (itself left out) every argv[2] seconds until its input closes,
# then prints the peaks in MiB.
_WATCH = "from experiments.mess3.benchmarks.process_memory import watch; import sys; watch(int(sys.argv[1]), float(sys.argv[2]))"


def watch(root: int, period_s: float) -> None:
    """The watcher's loop (run by TreeMemory in its own process): peaks to stdout once stdin closes."""
    peak_mib = peak_pss_mib = 0.0
    while True:
        sizes = [_resident_kib(pid) for pid in _descendants(root) if pid != os.getpid()]
        peak_mib = max(peak_mib, sum(rss for rss, _ in sizes) / 1024)
        peak_pss_mib = max(peak_pss_mib, sum(pss for _, pss in sizes) / 1024)
        if select.select([sys.stdin], [], [], period_s)[0] and not sys.stdin.read(1):
            break
    print(peak_mib, peak_pss_mib, flush=True)


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
