"""A watchdog process that ends a run's Ray processes when the run's driver dies without shutting Ray down.

    reaper = Reaper.start()     # right after a local ray.init; the watchdog notes the driver's descendants
    ...                         # kill -9 of the driver: the watchdog SIGKILLs every process it noted
    reaper.release()            # after ray.shutdown: the watchdog exits and kills nothing

Ray's own clean-up needs a live driver: after a SIGKILL, Ray's DashboardAgent and
RuntimeEnvAgent were left behind as orphans that ignore SIGTERM. The watchdog holds the read end
of a pipe whose write end only the driver holds (pipes are not inherited by Ray's children), so
the driver's death, however it comes, reaches it as end-of-file. It runs in a session of its own,
so a signal to the terminal's process group does not take it down first. Linux only (/proc); it
notes processes by (pid, start time), so a reused pid is never killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from rl.harness.run.status import process_start_ticks

POLL_S = 1.0
_RELEASE = b"q"


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    return children


def descendants(pid: int) -> Iterator[int]:
    """Every live process below `pid` (children, their children, ...)."""
    children, stack = _children_by_parent(), [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            yield child
            stack.append(child)


def _kill(noted: dict[int, int]) -> int:
    """SIGKILLs each noted process still alive with its noted start time, and whatever lives below it."""
    targets = dict(noted)
    for pid in list(noted):
        if process_start_ticks(pid) == noted[pid]:
            targets.update({child: process_start_ticks(child) for child in descendants(pid)})
    killed = 0
    for pid, ticks in targets.items():
        if ticks is not None and process_start_ticks(pid) == ticks:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def watch(driver: int, pipe: int, poll_s: float = POLL_S) -> None:
    """The watchdog's loop: note the driver's descendants until the pipe ends; kill them unless released."""
    os.set_blocking(pipe, False)
    noted: dict[int, int] = {}
    me = os.getpid()
    while True:
        try:
            data = os.read(pipe, 1)
        except BlockingIOError:
            data = None
        if data == _RELEASE:
            return
        if data == b"":  # end of file: the driver is gone without releasing
            _kill(noted)
            return
        for pid in descendants(driver):
            if pid != me and pid not in noted:
                ticks = process_start_ticks(pid)
                if ticks is not None:
                    noted[pid] = ticks
        time.sleep(poll_s)


class Reaper:
    """The driver's end of the watchdog (see the module docstring)."""

    def __init__(self, process: subprocess.Popen, pipe: int):
        self._process, self._pipe = process, pipe

    @classmethod
    def start(cls) -> Reaper | None:
        """Starts the watchdog of this process's Ray (None where /proc is missing: not Linux)."""
        if not os.path.isdir("/proc"):
            return None
        read_end, write_end = os.pipe()
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid()), str(read_end)],
            pass_fds=(read_end,),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        os.close(read_end)
        return cls(process, write_end)

    def release(self) -> None:
        """Ray was shut down: the watchdog exits without killing anything."""
        try:
            os.write(self._pipe, _RELEASE)
        except OSError:
            pass
        os.close(self._pipe)
        try:
            self._process.wait(timeout=5 * POLL_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]))
