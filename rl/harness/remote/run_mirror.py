"""A run's folders in the store: sent while the run goes (a thread beside training), or at once.

    mirror = run_mirror.LiveMirror(run_mirror.RunMirror(store, layout, experiment), interval_s=10)
    mirror.start()                       # after the run's folders exist; never blocks an iteration
    ...                                  # training: every interval, what changed is sent
    record = mirror.finish(drain_s=300)  # waits at most drain_s for the rest; writes remote_artifacts.json

    record = run_mirror.upload_run(store, experiment=..., layout=layout)   # everything at once (`sync`)

A file is sent once complete: a checkpoint once renamed into place (`.partial-*` folders are never
sent), a record once replaced (atomically; read once, so the copy sent is the one hashed),
`metrics.jsonl` and the TensorBoard events up to the size seen when they were hashed (they only
grow). Each file's sha256 is recorded with its key, in `results/<run-id>/remote_artifacts.json` here
and under the same name in the store (the index that `fetch` verifies against). A pass sends the
artifacts first, then writes the index, then the records: a record that names a checkpoint is never
in the store before the index lists that checkpoint. Of the artifacts, the metrics and events go
first, then the checkpoints, newest first; a checkpoint's state file goes after the rest of its
folder, and the newest one's is followed by the index at once (the others by the pass's index), so
the index names checkpoints only once whole in the store, with the rows they reflect, even while
the records lag (a resume takes the newest of them). A file removed while a pass sends it (a
rolling checkpoint replaced by the next) is skipped, not a fault of the store. A record sent again
in place of its earlier copy is announced in that index as its entry's `replacement` (size, sha256),
so that a process killed mid-pass leaves every record in the store matching its entry or its
replacement, never neither (a growing file's indexed prefix stays valid). Memory stays bounded:
files stream in 1 MiB chunks, a pass holds only the records it sends (each at most SNAPSHOT_BYTES),
and the mirror keeps one entry per file. A store that fails mid-run costs one warning; the thread
retries with backoff and the record lists what is not yet remote (`rl-harness sync <run-id>` sends
it later).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import re
import threading
import time
from collections.abc import Mapping

from absl import logging

from rl.harness.remote.store import Store, UploadError, chunks_of_prefix
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.run.status import utc_now

# remote_artifacts.json has its own schema (it was the manifest's version 1 before the manifest went to 2).
REMOTE_ARTIFACTS_SCHEMA_VERSION = 1
_UNFINISHED = (".partial-", ".tmp-")  # a checkpoint being saved, a record being replaced
MAX_BACKOFF_S = 300.0
SNAPSHOT_BYTES = 1 << 20  # records up to this size are read once per pass, hashed and sent from memory


_STATE_FILE_TAIL = f"/{records.CHECKPOINT_STATE_FILE}"
_CHECKPOINT_FOLDER = re.compile(r"artifacts/checkpoints/(?:[^/]+/)?(?:rolling_)?iter_(\d+)/")


def _send_order(relative: str) -> tuple:
    """Sort key of the artifacts a pass sends: first what is not a checkpoint (metrics, events: read after the
    checkpoints were listed, so they hold every row those reflect), then the checkpoints newest first (what a resume
    wants, when the mirror is behind), each folder's state file after the rest of it, so that the store holds a
    checkpoint whole once its state file is indexed (`run_fetch.RemoteRun.complete_checkpoints`)."""
    match = _CHECKPOINT_FOLDER.match(relative)
    if match is None:
        return (0, 0, "", False, relative)
    return (1, -int(match[1]), relative[: match.end()], relative.endswith(_STATE_FILE_TAIL), relative)


def sha256_of_prefix(path: pathlib.Path, size: int) -> str:
    """sha256 of the first `size` bytes of `path` (a file that may grow while it is read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in chunks_of_prefix(handle, size, str(path)):
            digest.update(chunk)
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class _Version:
    """A file as one pass sends it: its size and sha256, (size, mtime) when seen, and a record's bytes."""

    size: int
    sha256: str
    seen: tuple[int, int]
    data: bytes | None = None


class RunMirror:
    """What of one run is in the store: one entry (key, size, sha256) per file sent."""

    def __init__(
        self, store: Store, layout: RunLayout, experiment: str, *, also: Mapping[str, pathlib.Path] | None = None
    ):
        """`also`: files outside the run's folders sent as its own ({"artifacts/member.log": path}: a member's log)."""
        self.store = store
        self.layout = layout
        self.also = dict(also or {})
        self.run_prefix = layout.remote_prefix(store.config.prefix, experiment)
        self.started_at = utc_now()
        self._sent: dict[str, dict] = {}  # "artifacts/metrics.jsonl" -> its entry in the record
        self._seen: dict[str, tuple[int, int]] = {}  # -> (size, mtime_ns) when it was sent
        self._record_path = layout.results_dir / records.REMOTE_ARTIFACTS_FILE
        try:  # what an earlier mirror or upload sent of this run (sync): sent again only if changed
            earlier = json.loads(self._record_path.read_text())
        except (OSError, ValueError):
            earlier = {}
        if earlier.get("run_prefix") == self.run_prefix:
            self._sent = {entry["local"]: entry for entry in earlier.get("files", [])}

    def forget_missing(self, remote: dict[str, int]) -> None:
        """Forgets every file recorded as sent that the store's listing (`{key: size}`) lacks or holds at
        another size: the next pass sends it again."""
        self._sent = {
            relative: entry for relative, entry in self._sent.items() if remote.get(entry["key"]) == entry["size"]
        }

    def local_files(self) -> dict[str, pathlib.Path]:
        """{"artifacts/...": path, "results/...": path} of every complete file of the run."""
        files = {}
        for kind, root in (("artifacts", self.layout.artifacts_dir), ("results", self.layout.results_dir)):
            for path in sorted(root.rglob("*")):
                relative = path.relative_to(root)
                if any(part.startswith(_UNFINISHED) for part in relative.parts) or not path.is_file():
                    continue
                if kind == "results" and relative.as_posix() == records.REMOTE_ARTIFACTS_FILE:
                    continue
                files[f"{kind}/{relative.as_posix()}"] = path
        return {**files, **{relative: path for relative, path in self.also.items() if path.is_file()}}

    def pending(self) -> list[tuple[str, pathlib.Path]]:
        """The files not in the store as they are now."""
        waiting = []
        for relative, path in self.local_files().items():
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            if self._seen.get(relative) != (stat.st_size, stat.st_mtime_ns):
                waiting.append((relative, path))
        return waiting

    def _version(self, relative: str, path: pathlib.Path) -> _Version:
        """The file as it will be sent. A record (under results/, replaced whole, up to SNAPSHOT_BYTES) is read
        once, so what is hashed is what is sent however often it is replaced meanwhile; any other file only
        grows or never changes, so its prefix of the size seen now is hashed, then sent."""
        stat = path.stat()
        seen = (stat.st_size, stat.st_mtime_ns)
        if relative.startswith("results/") and stat.st_size <= SNAPSHOT_BYTES:
            data = path.read_bytes()
            return _Version(len(data), hashlib.sha256(data).hexdigest(), seen, data)
        return _Version(stat.st_size, sha256_of_prefix(path, stat.st_size), seen)

    def send_pending(self, *, attempts: int | None = None, halt: threading.Event | None = None) -> int:
        """Sends every pending file, then the index; returns how many were sent. UploadError (after the
        store's retries, or `attempts`) names the file; what was sent before it stays recorded.

        The artifacts go first; before the records, the index is written with what arrived and the
        records about to be replaced (module docstring), so a record in the store never names a
        file its index lacks, whenever the process dies."""
        versions = {}
        # The records are read before the artifacts are listed: a checkpoint a record names was in place
        # before the record was written, so it is among the artifacts this pass sends.
        for wanted in (True, False):
            for relative, path in self.pending():
                if relative.startswith("results/") != wanted:
                    continue
                try:
                    versions[relative] = (path, self._version(relative, path))
                except FileNotFoundError:  # replaced or removed meanwhile: the next pass sees what is there
                    continue
        records_waiting = [
            relative
            for relative in sorted(versions)
            if relative.startswith("results/") and not self._holds(relative, versions[relative][1])
        ]
        sent = self._send(
            sorted((relative for relative in versions if not relative.startswith("results/")), key=_send_order),
            versions,
            attempts,
            halt,
        )
        replaced = {
            relative: {"size": versions[relative][1].size, "sha256": versions[relative][1].sha256}
            for relative in records_waiting
            if relative in self._sent
        }
        if records_waiting and (sent or replaced) and not (halt is not None and halt.is_set()):
            self.store.put_bytes(
                self._index(replaced), f"{self.run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}", attempts=attempts
            )
        sent += self._send(
            [relative for relative in sorted(versions) if relative.startswith("results/")], versions, attempts, halt
        )
        if sent:
            self.store.put_bytes(
                self._index(), f"{self.run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}", attempts=attempts
            )
        return sent

    def _send(self, files: list[str], versions: dict, attempts: int | None, halt: threading.Event | None) -> int:
        sent = 0
        indexed = False
        for relative in files:
            if halt is not None and halt.is_set():
                break
            path, version = versions[relative]
            if not self._holds(relative, version):
                key = f"{self.run_prefix}/{relative}"
                try:
                    if version.data is None:
                        file_id = self.store.put_file(str(path), key, version.sha256, version.size, attempts=attempts)
                    else:
                        file_id = self.store.put_bytes(version.data, key, attempts=attempts)
                except UploadError as error:
                    if not path.exists():  # removed meanwhile: the next pass sees what is there
                        continue
                    error.file = relative
                    raise
                self._sent[relative] = {
                    "key": key,
                    "local": relative,
                    "size": version.size,
                    "sha256": version.sha256,
                    "file_id": file_id,
                }
                sent += 1
                if relative.endswith(_STATE_FILE_TAIL) and not indexed:  # the newest whole: resumable at once
                    indexed = True  # (older ones wait for the pass's index: one index, not one per checkpoint)
                    self.store.put_bytes(
                        self._index(), f"{self.run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}", attempts=attempts
                    )
            self._seen[relative] = version.seen
        return sent

    def _holds(self, relative: str, version: _Version) -> bool:
        """Whether the store holds `version` of the file already."""
        previous = self._sent.get(relative)
        return previous is not None and (previous["sha256"], previous["size"]) == (version.sha256, version.size)

    def _index(self, replacements: dict[str, dict] | None = None) -> bytes:
        """The store's index while the run goes; `replacements` ({local: {size, sha256}}) are about to be sent."""
        record = self.record("partial")
        record["files"] = [
            {**entry, "replacement": replacements[entry["local"]]} if entry["local"] in (replacements or {}) else entry
            for entry in record["files"]
        ]
        return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()

    def record(self, status: str, error: dict | None = None) -> dict:
        """remote_artifacts.json's content: what is remote (`files`) and what is not (`not_uploaded`)."""
        return {
            "schema_version": REMOTE_ARTIFACTS_SCHEMA_VERSION,
            "status": status,
            "store": self.store.config.url,
            "bucket": self.store.config.bucket,
            "run_id": self.layout.run_id,
            "run_prefix": self.run_prefix,
            "started_at": self.started_at,
            "ended_at": utc_now(),
            "files": [self._sent[relative] for relative in sorted(self._sent)],
            "error": error,
            "not_uploaded": [relative for relative, _ in self.pending()],
        }

    def write_record(self, status: str, error: dict | None = None) -> dict:
        """Writes the record here (atomically) and, when the store answers, there; returns it."""
        record = self.record(status, error)
        records.write_json_atomically(str(self._record_path), record)
        try:
            self.store.put_bytes(
                (json.dumps(record, indent=2, sort_keys=True) + "\n").encode(),
                f"{self.run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}",
                attempts=1,
            )
        except UploadError:
            pass  # the local record says what is not remote; `sync` sends both later
        return record


def upload_run(store: Store, *, experiment: str, layout: RunLayout) -> dict:
    """Sends every file of a run that the store lacks (each retried with backoff); writes the record.
    UploadError names the file that failed, after the record of what did arrive is written."""
    mirror = RunMirror(store, layout, experiment)
    try:
        mirror.forget_missing(store.list_keys(mirror.run_prefix))
        mirror.send_pending()
    except UploadError as error:
        mirror.write_record("failed", {"file": getattr(error, "file", None), "message": str(error)})
        raise
    record = mirror.write_record("complete")
    logging.info(
        "%d files of run %s are in %s://%s/%s",
        len(record["files"]),
        layout.run_id,
        store.config.scheme,
        store.config.bucket,
        mirror.run_prefix,
    )
    return record


class LiveMirror:
    """`RunMirror` in a thread of its own while the run trains: a pass every `interval_s`."""

    def __init__(self, mirror: RunMirror, *, interval_s: float, clock=time.monotonic):
        self.mirror = mirror
        self._interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._failing_since: float | None = None
        self._backoff_s = interval_s
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="rl-harness-mirror", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        delay = self._interval_s
        while not self._stop.wait(delay):
            delay = self._pass()

    def _pass(self) -> float:
        """One pass; returns the seconds until the next (longer, up to MAX_BACKOFF_S, while the store fails)."""
        try:
            self.mirror.send_pending(attempts=1, halt=self._stop)
        except UploadError as error:
            self.last_error = str(error)
            if self._failing_since is None:
                self._failing_since = self._clock()
                logging.warning(
                    "the store failed (%s); training goes on and the mirror retries with backoff; what is"
                    " not sent at the end is listed in %s (`rl-harness sync %s` sends it later)",
                    error,
                    records.REMOTE_ARTIFACTS_FILE,
                    self.mirror.layout.run_id,
                )
            self._backoff_s = min(self._backoff_s * 2, MAX_BACKOFF_S)
            return self._backoff_s
        if self._failing_since is not None:
            logging.info(
                "the store answers again after %.0f s; the mirror caught up", self._clock() - self._failing_since
            )
            self._failing_since, self._backoff_s, self.last_error = None, self._interval_s, None
        return self._interval_s

    def finish(self, *, drain_s: float) -> dict:
        """Stops the thread, then sends what is left for at most `drain_s`; writes and returns the record
        (`complete`, or `incomplete` with `not_uploaded`)."""
        self._stop.set()
        self._thread.join()
        deadline = self._clock() + drain_s
        backoff_s = 1.0
        while True:
            try:
                self.mirror.send_pending(attempts=1)
                return self.mirror.write_record("complete")
            except UploadError as error:
                self.last_error = str(error)
            if self._clock() + backoff_s > deadline:
                break
            time.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, MAX_BACKOFF_S)
        logging.warning(
            "the store did not take all of run %s within %.0f s (%s); `rl-harness sync %s` sends the rest",
            self.mirror.layout.run_id,
            drain_s,
            self.last_error,
            self.mirror.layout.run_id,
        )
        return self.mirror.write_record("incomplete", {"file": None, "message": self.last_error})

    def halt(self) -> dict:
        """Stops at once (a signal during the drain); writes and returns the record."""
        self._stop.set()
        return self.mirror.write_record("interrupted")
