"""Run ids and the on-disk records of a run: atomic JSON, append-only JSON lines, derived status.

    from rl.harness.run import records

    run_id = records.new_run_id()                  # "20261201T011500Z-3f9a2c"
    records.write_json_atomically(path, {...})     # temp file in the same folder, then os.replace
    with records.JsonLinesWriter(path) as metrics:
        metrics.append({"training_iteration": 1})  # one write + flush per row
    rows = records.read_json_lines(path)           # ignores a torn last line (SIGKILL mid-write)
    records.effective_status(manifest)             # "crashed" for a running record whose writer is gone

Layout of one run (see docs/harness.md):

    <results-root>/[smoke/]<run-id>/run_manifest.json    provenance and status (committed)
    <results-root>/[smoke/]<run-id>/summary.json         compact curves (committed)
    <artifacts-root>/[smoke/]<run-id>/metrics.jsonl      every result row (git-ignored)
    <artifacts-root>/[smoke/]<run-id>/checkpoints/...    checkpoints, Tune storage
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
import secrets
import socket
import tempfile
import time
from typing import Any, Callable, Optional

from rl.harness.errors import UsageError
from rl.harness.run import metric_keys

MANIFEST_SCHEMA_VERSION = 1
MANIFEST_FILE = "run_manifest.json"
SUMMARY_FILE = "summary.json"
METRICS_FILE = "metrics.jsonl"
REMOTE_ARTIFACTS_FILE = "remote_artifacts.json"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_STATE_FILE = "harness_checkpoint.json"
SMOKE_DIR = "smoke"
# A dirty checkout's change, in results/<run-id>/ so `rl-harness reproduce` can rebuild it.
PATCH_FILE = "uncommitted.patch"

# Statuses a manifest can hold; "crashed" is only ever derived (effective_status).
RUNNING, COMPLETED, FAILED, INTERRUPTED, CRASHED = "running", "completed", "failed", "interrupted", "crashed"
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

    key: Optional[str] = None
    bound: Optional[int] = None

    @staticmethod
    def of(iterations: Optional[int], env_steps: Optional[int]) -> "RowBudget":
        if iterations is not None:
            return RowBudget(ITERATION_KEY, iterations)
        return RowBudget(ENV_STEPS_KEY, env_steps) if env_steps is not None else RowBudget()

    def reached(self, row: dict) -> bool:
        return self.key is not None and (row.get(self.key) or 0) >= self.bound

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


_RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"
_RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class RecordError(UsageError, RuntimeError):
    """A record is missing, unreadable or has an unknown schema; the message names the fix."""


def utc_now() -> str:
    """ISO-8601 UTC timestamp with microseconds (what every record stores)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def parse_time(stamp: str) -> float:
    """Seconds since the epoch of a `utc_now()` timestamp."""
    return datetime.datetime.fromisoformat(stamp).timestamp()


def new_run_id(now: Optional[datetime.datetime] = None) -> str:
    """Sortable UTC timestamp plus six random hex digits, e.g. `20261201T011500Z-3f9a2c`."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"{now.strftime(_RUN_ID_FORMAT)}-{secrets.token_hex(3)}"


def run_id_problem(run_id: str) -> Optional[str]:
    """Why `run_id` cannot name a run folder, or None if it can."""
    if "/" in run_id or "\\" in run_id or ".." in run_id:
        return f"run id {run_id!r} contains '/', '\\' or '..'; use letters, digits, '.', '_' and '-' only"
    if run_id == SMOKE_DIR:
        return f"run id {run_id!r} is reserved for the smoke-run folder; choose another"
    if not _RUN_ID_PATTERN.fullmatch(run_id):
        return (f"run id {run_id!r} is not a plain name; use 1-128 letters, digits, '.', '_' and '-',"
                " starting with a letter or digit")
    return None


def _json_ready(value: Any) -> Any:
    """Non-finite floats become null, so every record is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value


def write_file_atomically(path: str, write: Callable[[str], None], *, mode: int = 0o644) -> None:
    """`write(temporary_path)` fills a file beside `path`, which then replaces `path` (with `mode`).

    Readers see the old file or the new one, never a half-written one; on any error the
    temporary file is removed and `path` is untouched.
    """
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(handle)
    try:
        write(temporary)
        os.chmod(temporary, mode)  # mkstemp creates 0600; records are for everyone who may read the folder
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_bytes_atomically(path: str, data: bytes, *, mode: int = 0o644) -> None:
    def write(temporary: str) -> None:
        with open(temporary, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())

    write_file_atomically(path, write, mode=mode)


def write_text_atomically(path: str, text: str, *, mode: int = 0o644) -> None:
    write_bytes_atomically(path, text.encode(), mode=mode)


def write_json_atomically(path: str, record: Any) -> None:
    write_text_atomically(path, json.dumps(_json_ready(record), indent=2, sort_keys=True) + "\n")


def read_json(path: str, what: str) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError as error:
        raise RecordError(f"no {what} at {path}") from error
    except (OSError, json.JSONDecodeError) as error:
        raise RecordError(f"cannot read the {what} at {path} ({error}); restore it from git or B2") from error


class JsonLinesWriter:
    """Append-only JSON lines: each row is one write() and a flush, so a crash loses no finished row."""

    def __init__(self, path: str):
        self.path = path
        self._stream = open(path, "a", buffering=1)

    def append(self, row: dict) -> None:
        self._stream.write(json.dumps(_json_ready(row), sort_keys=True) + "\n")
        self._stream.flush()

    def sync(self) -> None:
        """fsync: survive a power loss too (called at checkpoints and on close)."""
        if not self._stream.closed:
            os.fsync(self._stream.fileno())

    def close(self) -> None:
        if not self._stream.closed:
            self.sync()
            self._stream.close()

    def __enter__(self) -> "JsonLinesWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_json_lines(path: str) -> list[dict]:
    """Every complete row; a torn final line (the writer was killed mid-write) is skipped."""
    rows = []
    with open(path) as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):  # unterminated last line: the only one a crash can tear
                break
            raise RecordError(f"{path}:{number} is not JSON ({error})") from error
    return rows


def process_start_ticks(pid: int) -> Optional[int]:
    """Start time of `pid` in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is the state (field 3 of stat); starttime is field 22.
    return None if fields[0] in ("Z", "X") else int(fields[19])


def this_process() -> dict:
    """Who writes a record: compared by `effective_status` to spot a dead writer."""
    pid = os.getpid()
    return {"hostname": socket.gethostname(), "pid": pid, "start_ticks": process_start_ticks(pid)}


def _writer_gone(writer: dict) -> bool:
    if writer.get("hostname") != socket.gethostname():
        return False  # another machine: only the heartbeat can tell
    pid = writer["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    recorded = writer.get("start_ticks")
    current = process_start_ticks(pid)
    if current is None and os.path.exists("/proc"):
        return True  # a zombie: killed but not yet reaped
    return recorded is not None and current is not None and recorded != current


def crash_reason(manifest: dict, now: Optional[float] = None) -> Optional[str]:
    """Why a manifest still marked running belongs to a dead run, or None."""
    if manifest.get("status") != RUNNING:
        return None
    now = time.time() if now is None else now
    heartbeat = manifest.get("heartbeat") or {}
    age = now - parse_time(heartbeat["at"]) if heartbeat.get("at") else math.inf
    if age > heartbeat.get("stale_after_s", 0):
        return f"heartbeat is {age:.0f} s old (stale after {heartbeat.get('stale_after_s')} s)"
    writer = manifest.get("process") or {}
    if writer and _writer_gone(writer):
        return f"its process {writer['pid']} on {writer['hostname']} is gone"
    return None


def effective_status(manifest: dict, now: Optional[float] = None) -> str:
    """The recorded status, except a running record with a dead writer reads as "crashed"."""
    return CRASHED if crash_reason(manifest, now) else manifest.get("status", "unknown")


def check_schema(manifest: dict, path: str) -> dict:
    version = manifest.get("schema_version")
    if version != MANIFEST_SCHEMA_VERSION:
        raise RecordError(
            f"{path} has schema_version {version!r}; this harness reads {MANIFEST_SCHEMA_VERSION}:"
            " use the rl-harness version that wrote it"
        )
    return manifest


def read_manifest(run_dir: str) -> dict:
    path = os.path.join(run_dir, MANIFEST_FILE)
    return check_schema(read_json(path, "run manifest"), path)


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
