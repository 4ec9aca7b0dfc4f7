"""The on-disk records of a run: their file names, atomic JSON, append-only JSON lines.

    from rl.harness.run import records

    records.write_json_atomically(path, {...})     # temp file in the same folder, then os.replace
    with records.JsonLinesWriter(path) as metrics:
        metrics.append({"training_iteration": 1})  # one write + flush per row
    rows = records.read_json_lines(path)           # ignores a torn last line (SIGKILL mid-write)

Layout of one run (see docs/harness.md):

    <results-root>/[smoke/]<run-id>/run_manifest.json    provenance and status (committed)
    <results-root>/[smoke/]<run-id>/summary.json         compact curves (committed)
    <artifacts-root>/[smoke/]<run-id>/metrics.jsonl      every result row (git-ignored)
    <artifacts-root>/[smoke/]<run-id>/tensorboard/       the rows as TensorBoard events (a view: run/tensorboard_events.py)
    <artifacts-root>/[smoke/]<run-id>/checkpoints/...    checkpoints, Tune storage
    <artifacts-root>/[smoke/]<run-id>/<figure>.png       figures (`output_place`): kept with the artifacts, not in git
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from rl.harness.errors import UsageError

MANIFEST_FILE = "run_manifest.json"
SUMMARY_FILE = "summary.json"
# Pictures are made from the numbers a run records, so they stay out of its committed records.
FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf")
RESULTS, ARTIFACTS = "results", "artifacts"


def output_place(name: str) -> str:
    """Where a run's output `name` goes by default: a figure with the artifacts, anything else with the results.

    output_place("probe_report.json")   # "results": small, committed
    output_place("learning_curves.png") # "artifacts": git-ignored, mirrored with the checkpoints
    """
    return ARTIFACTS if name.lower().endswith(FIGURE_SUFFIXES) else RESULTS


METRICS_FILE = "metrics.jsonl"
# A resumed run's copy of the rows its lineage logged up to the checkpoint it starts from (RunSession.carry).
LINEAGE_METRICS_FILE = "lineage_metrics.jsonl"
# A study member's output (stdout and stderr), written beside its run by its trial and mirrored with the run.
MEMBER_LOG_FILE = "member.log"
REMOTE_ARTIFACTS_FILE = "remote_artifacts.json"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_STATE_FILE = "harness_checkpoint.json"
SMOKE_DIR = "smoke"
# A dirty checkout's change, in results/<run-id>/ so `rl-harness reproduce` can rebuild it.
PATCH_FILE = "uncommitted.patch"
# In every results and artifacts root the harness writes to: provenance leaves the folder out.
OUTPUT_ROOT_MARKER = ".rl-harness-output-root"


class RecordError(UsageError, RuntimeError):
    """A record is missing, unreadable or has an unknown schema; the message names the fix."""


def _json_ready(value: Any) -> Any:
    """Non-finite floats become null, so every record is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value


def _umask() -> int:
    """The process's umask, read without changing it (os.umask would, for an instant, for every thread)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK_AT_IMPORT


_UMASK_AT_IMPORT = os.umask(0o022)
os.umask(_UMASK_AT_IMPORT)


def write_file_atomically(path: str, write: Callable[[str], None], *, mode: int = 0o666) -> None:
    """`write(temporary_path)` fills a file beside `path`, which then replaces `path` (with `mode` less the umask).

    Readers see the old file or the new one, never a half-written one; on any error the
    temporary file is removed and `path` is untouched.
    """
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(handle)
    try:
        write(temporary)
        # mkstemp creates 0600; a record gets the mode any new file would (a umask of 077 keeps it private)
        os.chmod(temporary, mode & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_bytes_atomically(path: str, data: bytes, *, mode: int = 0o666) -> None:
    write_files_atomically(os.path.dirname(os.path.abspath(path)), {os.path.basename(path): data}, mode=mode)


def write_files_atomically(folder: str, contents: Mapping[str, bytes], *, mode: int = 0o666) -> None:
    """Files of `folder` replaced together (name -> bytes): each is written to a temporary file beside it and
    fsynced, and only once all are written do they replace theirs. A failure (a full disk) removes the
    temporary files and leaves every file as it was, so a set that belongs together is never half new."""
    temporaries = []
    try:
        for name, data in contents.items():
            handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=name)
            temporaries.append((temporary, os.path.join(folder, name)))
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(temporary, mode & ~_umask())  # mkstemp creates 0600: a record gets a new file's mode
        for temporary, path in temporaries:
            os.replace(temporary, path)
    except BaseException:
        for temporary, _ in temporaries:
            if os.path.exists(temporary):
                os.unlink(temporary)
        raise


def write_text_atomically(path: str, text: str, *, mode: int = 0o666) -> None:
    write_bytes_atomically(path, text.encode(), mode=mode)


def json_bytes(record: Any) -> bytes:
    """A JSON record as its file holds it (indented, keys sorted, a final newline)."""
    return (json.dumps(_json_ready(record), indent=2, sort_keys=True) + "\n").encode()


def write_json_atomically(path: str, record: Any) -> None:
    write_bytes_atomically(path, json_bytes(record))


def write_json_lines_atomically(path: str, rows: list[dict]) -> None:
    """A whole JSON-lines file at once (`read_json_lines` reads it), atomically."""
    write_text_atomically(path, "".join(json.dumps(_json_ready(row), sort_keys=True) + "\n" for row in rows))


def write_data_atomically(path: str, data: Any) -> None:
    """`data` as a file, atomically: bytes as they are, text as UTF-8, anything else as JSON."""
    if isinstance(data, (bytes, bytearray)):
        write_bytes_atomically(path, bytes(data))
    elif isinstance(data, str):
        write_text_atomically(path, data)
    else:
        write_json_atomically(path, data)


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
        self._stream = open(path, "a", buffering=1)  # noqa: SIM115 - open while the writer is; close() closes it

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

    def __enter__(self) -> JsonLinesWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def torn_final_line(path: str) -> int | None:
    """The number of the final line if it is cut mid-row (no newline, not JSON), else None."""
    with open(path, "rb") as handle:
        content = handle.read()
    if not content or content.endswith(b"\n"):
        return None
    last = content.rsplit(b"\n", 1)[-1]
    try:
        json.loads(last)
        return None
    except ValueError:
        return content.count(b"\n") + 1


def read_run_rows(artifacts_dir) -> list[dict]:
    """A run's metrics rows with its lineage's: a resumed run's carried rows (LINEAGE_METRICS_FILE) up to its
    checkpoint, then its own (METRICS_FILE); [] for a run that logged none."""
    paths = [os.path.join(str(artifacts_dir), name) for name in (LINEAGE_METRICS_FILE, METRICS_FILE)]
    return [row for path in paths if os.path.isfile(path) for row in read_json_lines(path)]


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
