"""A run's id and status: run ids, timestamps, the statuses a manifest holds, and telling a crashed run apart.

    from rl.harness.run.status import crash_reason, new_run_id, run_id_problem

    run_id = new_run_id()                 # "20261201T011500Z-3f9a2c"
    run_id_problem("a/b")                 # why it cannot name a run folder, or None
    crash_reason(RUNNING, heartbeat, writer)   # why a record still marked running belongs to a dead run, or None

A manifest reads its own effective status (`RunManifest.effective_status`: "crashed" for a running
run whose writer is gone) from these plain values.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import re
import secrets
import socket
import time

from rl.harness.run.records import SMOKE_DIR

# Statuses a manifest can hold; "crashed" is only ever derived (crash_reason).
RUNNING, COMPLETED, FAILED, INTERRUPTED, CRASHED = "running", "completed", "failed", "interrupted", "crashed"

_RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"
_RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def utc_now() -> str:
    """ISO-8601 UTC timestamp with microseconds (what every record stores)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def parse_time(stamp: str) -> float:
    """Seconds since the epoch of a `utc_now()` timestamp."""
    return datetime.datetime.fromisoformat(stamp).timestamp()


def new_run_id(now: datetime.datetime | None = None) -> str:
    """Sortable UTC timestamp plus six random hex digits, e.g. `20261201T011500Z-3f9a2c`."""
    now = now or datetime.datetime.now(datetime.UTC)
    return f"{now.strftime(_RUN_ID_FORMAT)}-{secrets.token_hex(3)}"


def run_id_problem(run_id: str) -> str | None:
    """Why `run_id` cannot name a run folder, or None if it can."""
    if "/" in run_id or "\\" in run_id or ".." in run_id:
        return f"run id {run_id!r} contains '/', '\\' or '..'; use letters, digits, '.', '_' and '-' only"
    if run_id == SMOKE_DIR:
        return f"run id {run_id!r} is reserved for the smoke-run folder; choose another"
    if not _RUN_ID_PATTERN.fullmatch(run_id):
        return (
            f"run id {run_id!r} is not a plain name; use 1-128 letters, digits, '.', '_' and '-',"
            " starting with a letter or digit"
        )
    return None


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is the state (field 3 of stat); starttime is field 22.
    return None if fields[0] in ("Z", "X") else int(fields[19])


@dataclasses.dataclass(frozen=True)
class Heartbeat:
    """When the run's writer last rewrote its manifest, and after how long without a beat it counts as gone."""

    at: str | None
    interval_s: float | None = None
    stale_after_s: float | None = None


@dataclasses.dataclass(frozen=True)
class WriterProcess:
    """Who writes the manifest: compared by `status.crash_reason` to spot a dead writer."""

    hostname: str
    pid: int
    start_ticks: int | None = None


def this_process() -> WriterProcess:
    """Who writes a record: compared by `crash_reason` to spot a dead writer."""
    pid = os.getpid()
    return WriterProcess(hostname=socket.gethostname(), pid=pid, start_ticks=process_start_ticks(pid))


def writer_gone(writer: WriterProcess) -> bool:
    """Whether the process that wrote a record is known to be dead (on this machine; elsewhere: False)."""
    if writer.hostname != socket.gethostname():
        return False  # another machine: only the heartbeat can tell
    pid = writer.pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    recorded = writer.start_ticks
    current = process_start_ticks(pid)
    if current is None and os.path.exists("/proc"):
        return True  # a zombie: killed but not yet reaped
    return recorded is not None and current is not None and recorded != current


def crash_reason(
    status: str | None, heartbeat: Heartbeat | None, writer: WriterProcess | None, now: float | None = None
) -> str | None:
    """Why a record with this status, heartbeat and writer still marked running belongs to a dead run, or None."""
    if status != RUNNING:
        return None
    now = time.time() if now is None else now
    age = now - parse_time(heartbeat.at) if heartbeat is not None and heartbeat.at else math.inf
    stale_after = (heartbeat.stale_after_s if heartbeat is not None else None) or 0
    if age > stale_after:
        return f"heartbeat is {age:.0f} s old (stale after {stale_after} s)"
    if writer is not None and writer_gone(writer):
        return f"its process {writer.pid} on {writer.hostname} is gone"
    return None
