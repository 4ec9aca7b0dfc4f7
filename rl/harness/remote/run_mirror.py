"""A run's folders in the store: sent while the run goes (a thread beside training), or at once.

    mirror = run_mirror.LiveMirror(run_mirror.RunMirror(store, layout, experiment), interval_s=10)
    mirror.start()                       # after the run's folders exist; never blocks an iteration
    ...                                  # training: every interval, what changed is sent
    record = mirror.finish(drain_s=300)  # waits at most drain_s for the rest; writes remote_artifacts.json

    record = run_mirror.upload_run(store, experiment=..., layout=layout)   # everything at once (`sync`)

A file is sent once complete: a checkpoint once renamed into place (`.partial-*` folders are never
sent), a record once replaced (atomically), `metrics.jsonl` and the TensorBoard events up to the
size seen when they were hashed (they only grow). Each file's sha256 is recorded with its key, in
`results/<run-id>/remote_artifacts.json` here and under the same name in the store (the index that
`fetch` verifies against). Memory stays bounded: files stream in 1 MiB chunks, and the mirror keeps
one entry per file. A store that fails mid-run costs one warning; the thread retries with backoff
and the record lists what is not yet remote (`rl-harness sync <run-id>` sends it later).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import threading
import time
from typing import Optional

from absl import logging

from rl.harness.remote.store import Store, UploadError, chunks_of_prefix
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.run.status import utc_now

# remote_artifacts.json has its own schema (it was the manifest's version 1 before the manifest went to 2).
REMOTE_ARTIFACTS_SCHEMA_VERSION = 1
_UNFINISHED = (".partial-", ".tmp-")  # a checkpoint being saved, a record being replaced
MAX_BACKOFF_S = 300.0
RECORD_SETTLE_S = 0.1  # a record this fresh at a pass's listing waits for the next (coarse file clocks lag)


def sha256_of_prefix(path: pathlib.Path, size: int) -> str:
    """sha256 of the first `size` bytes of `path` (a file that may grow while it is read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in chunks_of_prefix(handle, size, str(path)):
            digest.update(chunk)
    return digest.hexdigest()


class RunMirror:
    """What of one run is in the store: one entry (key, size, sha256) per file sent."""

    def __init__(self, store: Store, layout: RunLayout, experiment: str):
        self.store = store
        self.layout = layout
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
        self._sent = {relative: entry for relative, entry in self._sent.items()
                      if remote.get(entry["key"]) == entry["size"]}

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
        return files

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

    def send_pending(self, *, attempts: Optional[int] = None, halt: Optional[threading.Event] = None) -> int:
        """Sends every pending file, then the index; returns how many were sent. UploadError (after the
        store's retries, or `attempts`) names the file; what was sent before it stays recorded."""
        sent = 0
        listed_at = time.time()
        pending = self.pending()
        # Records go last, and only those written before the listing: a run records a checkpoint after renaming it
        # into place, so the store never holds a manifest that names a checkpoint it lacks.
        for relative, path in sorted(pending, key=lambda item: item[0].startswith("results/")):
            if halt is not None and halt.is_set():
                break
            try:
                stat = path.stat()
                if relative.startswith("results/") and stat.st_mtime > listed_at - RECORD_SETTLE_S:
                    continue  # written after the listing (or as good as): the next pass sends it
                sha256 = sha256_of_prefix(path, stat.st_size)
            except FileNotFoundError:  # replaced or removed meanwhile: the next pass sees what is there
                continue
            previous = self._sent.get(relative)
            if previous is None or (previous["sha256"], previous["size"]) != (sha256, stat.st_size):
                key = f"{self.run_prefix}/{relative}"
                if previous is not None and relative.startswith("results/"):
                    # A record replaced whole: the index first vouches for both contents, so a writer killed
                    # between the two uploads leaves a store whose index still matches what it holds.
                    self._sent[relative] = {**previous, "sha256": sha256, "size": stat.st_size,
                                            "replaces": {"sha256": previous["sha256"], "size": previous["size"]}}
                    self.store.put_bytes(self._index(), self._index_key, attempts=attempts)
                try:
                    version = self.store.put_file(str(path), key, sha256, stat.st_size, attempts=attempts)
                except UploadError as error:
                    if previous is not None:
                        self._sent[relative] = previous
                    error.file = relative
                    raise
                self._sent[relative] = {"key": key, "local": relative, "size": stat.st_size, "sha256": sha256,
                                        "file_id": version}
                sent += 1
            self._seen[relative] = (stat.st_size, stat.st_mtime_ns)
        if sent:
            self.store.put_bytes(self._index(), self._index_key, attempts=attempts)
        return sent

    @property
    def _index_key(self) -> str:
        return f"{self.run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}"

    def _index(self) -> bytes:
        return (json.dumps(self.record("partial"), indent=2, sort_keys=True) + "\n").encode()

    def record(self, status: str, error: Optional[dict] = None) -> dict:
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

    def write_record(self, status: str, error: Optional[dict] = None) -> dict:
        """Writes the record here (atomically) and, when the store answers, there; returns it."""
        record = self.record(status, error)
        records.write_json_atomically(str(self._record_path), record)
        try:
            self.store.put_bytes((json.dumps(record, indent=2, sort_keys=True) + "\n").encode(), self._index_key,
                                 attempts=1)
        except UploadError:
            pass  # the local record says what is not remote; `sync` sends both later
        return record


def upload_run(store: Store, *, experiment: str, layout: RunLayout) -> dict:
    """Sends every file of a run that the store lacks (each retried with backoff); writes the record.
    UploadError names the file that failed, after the record of what did arrive is written."""
    mirror = RunMirror(store, layout, experiment)
    try:
        mirror.forget_missing(store.list_keys(mirror.run_prefix))
        while mirror.send_pending() or mirror.pending():  # a record written during a pass goes in the next
            time.sleep(RECORD_SETTLE_S)
    except UploadError as error:
        mirror.write_record("failed", {"file": getattr(error, "file", None), "message": str(error)})
        raise
    record = mirror.write_record("complete")
    logging.info("%d files of run %s are in %s://%s/%s", len(record["files"]), layout.run_id, store.config.scheme,
                 store.config.bucket, mirror.run_prefix)
    return record


class LiveMirror:
    """`RunMirror` in a thread of its own while the run trains: a pass every `interval_s`."""

    def __init__(self, mirror: RunMirror, *, interval_s: float, clock=time.monotonic):
        self.mirror = mirror
        self._interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._failing_since: Optional[float] = None
        self._backoff_s = interval_s
        self.last_error: Optional[str] = None
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
                logging.warning("the store failed (%s); training goes on and the mirror retries with backoff; what is"
                                " not sent at the end is listed in %s (`rl-harness sync %s` sends it later)",
                                error, records.REMOTE_ARTIFACTS_FILE, self.mirror.layout.run_id)
            self._backoff_s = min(self._backoff_s * 2, MAX_BACKOFF_S)
            return self._backoff_s
        if self._failing_since is not None:
            logging.info("the store answers again after %.0f s; the mirror caught up", self._clock() - self._failing_since)
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
                if not self.mirror.pending():
                    return self.mirror.write_record("complete")
                wait_s = RECORD_SETTLE_S  # a record written during the pass: the next one sends it
            except UploadError as error:
                self.last_error = str(error)
                wait_s, backoff_s = backoff_s, min(backoff_s * 2, MAX_BACKOFF_S)
            if self._clock() + wait_s > deadline:
                break
            time.sleep(wait_s)
        logging.warning("the store did not take all of run %s within %.0f s (%s); `rl-harness sync %s` sends the rest",
                        self.mirror.layout.run_id, drain_s, self.last_error, self.mirror.layout.run_id)
        return self.mirror.write_record("incomplete", {"file": None, "message": self.last_error})

    def halt(self) -> dict:
        """Stops at once (a signal during the drain); writes and returns the record."""
        self._stop.set()
        return self.mirror.write_record("interrupted")
