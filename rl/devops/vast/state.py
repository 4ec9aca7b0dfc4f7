"""The local record of launched instances and quarantined machines: one JSON file under a file lock.

    from rl.devops.vast import state

    store = state.StateFile(pathlib.Path("~/.local/state/rl-harness/vast").expanduser())
    with store.update() as doc:                  # exclusive lock; written atomically on exit
        doc.records["rlh-ab12cd-0"] = state.Record(label="rlh-ab12cd-0", launch_id="ab12cd", ...)
        doc.quarantine_machine(5678, "never booted", hours=24)
    store.read().live()                          # records whose instance may still exist (and bill)
    store.read().quarantined()                   # {machine_id: reason} of unexpired entries

Every read-modify-write holds an exclusive `fcntl.flock` on `state.lock` beside
the file, so concurrent commands (an `up` while a `destroy` runs, or the
threads of one parallel launch) never lose each other's updates. Writes go to a
temporary file in the same folder, then `os.replace`: a reader sees the old
file or the new one, never half of one. Nothing secret is ever stored here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import pathlib
import time
from collections.abc import Iterator

from rl.devops.vast import redact
from rl.harness.run import records

SCHEMA_VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
# SSH host keys, one file per instance (durability.CopyBack), beside the state file.
KNOWN_HOSTS_DIR = "known_hosts.d"

# Record statuses. The instance may exist (and bill) in the "live" ones.
LAUNCHING = "launching"  # create request sent; no instance id known yet
BOOTING = "booting"  # instance created, not yet running
RUNNING = "running"  # booted; the bootstrap is working or done
KEPT = "kept"  # results not secured: kept on purpose (see note)
DESTROYED = "destroyed"  # destroyed by us after the durability gate (or before it ever ran)
FAILED = "failed"  # no instance: the launch failed
VANISHED = "vanished"  # the instance disappeared without our destroy
LIVE_STATUSES = frozenset({LAUNCHING, BOOTING, RUNNING, KEPT})


@dataclasses.dataclass(frozen=True)
class Record:
    """One launched (or attempted) instance, named by its vast.ai label."""

    label: str
    launch_id: str
    target: str
    seed: int | None  # None: an instance of a study's share (study_launch.py)
    run_id: str
    sink: str  # "copy" or "b2" (durability.SinkSpec)
    dest: str  # where results are copied back to
    remote_out: str  # the instance's output folder
    b2_bucket: str | None = None
    status: str = LAUNCHING
    offer_id: int | None = None
    machine_id: int | None = None
    instance_id: int | None = None
    dph_total: float | None = None
    created_at: float | None = None
    ended_at: float | None = None
    attempts: int = 0
    note: str = ""
    claimed_at: float | None = None  # when a watcher claimed this label, before its create call
    seen_at: float | None = None  # when a watcher last saw the instance exist (its end, if it ended itself)

    @property
    def share(self) -> int | None:
        """The job (share) index in the label `rlh-<launch>-<share>-<attempt>`, or None for another label."""
        parts = self.label.split("-")
        return int(parts[2]) if len(parts) == 4 and parts[2].isdigit() else None

    def hours(self, now: float) -> float:
        """Hours billed so far: from creation to destruction (or to `now` while live)."""
        if self.created_at is None:
            return 0.0
        return max(0.0, ((self.ended_at or now) - self.created_at) / 3600.0)

    def spend(self, now: float) -> float:
        """Dollars spent: the rented price per hour times `hours` (an estimate of vast.ai's bill)."""
        return (self.dph_total or 0.0) * self.hours(now)


@dataclasses.dataclass
class State:
    records: dict[str, Record] = dataclasses.field(default_factory=dict)
    quarantine: dict[int, dict] = dataclasses.field(default_factory=dict)
    # Managed launches by id, as `managed.Launch.to_json()` writes them (what a watcher needs to go on).
    launches: dict[str, dict] = dataclasses.field(default_factory=dict)

    def live(self) -> list[Record]:
        return [record for record in self.records.values() if record.status in LIVE_STATUSES]

    def quarantined(self, now: float | None = None) -> dict[int, str]:
        """{machine_id: reason} of the entries not yet expired at `now`."""
        now = time.time() if now is None else now
        return {machine: entry["reason"] for machine, entry in self.quarantine.items() if entry["until"] > now}

    def quarantine_machine(self, machine_id: int, reason: str, *, hours: float, now: float | None = None) -> None:
        """Keeps `machine_id` out of every offer search for `hours`; expired entries are dropped."""
        if hours <= 0:
            raise redact.DevopsError(f"quarantine for {hours} h: give a positive number of hours")
        now = time.time() if now is None else now
        self.quarantine = {m: e for m, e in self.quarantine.items() if e["until"] > now}
        self.quarantine[int(machine_id)] = {"reason": redact.redact(reason), "until": now + hours * 3600.0}

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "records": {label: dataclasses.asdict(record) for label, record in sorted(self.records.items())},
            "quarantine": {str(machine): entry for machine, entry in sorted(self.quarantine.items())},
            "launches": dict(sorted(self.launches.items())),
        }

    @classmethod
    def from_json(cls, document: dict) -> State:
        if document.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"schema {document.get('schema')!r}, expected {SCHEMA_VERSION}")
        return cls(
            records={label: Record(**fields) for label, fields in document["records"].items()},
            quarantine={int(machine): entry for machine, entry in document["quarantine"].items()},
            launches=dict(document.get("launches", {})),
        )


class StateFile:
    """The state file in `directory` (created on first write). `lock_timeout_s` bounds waiting for the lock."""

    def __init__(self, directory: pathlib.Path, *, lock_timeout_s: float = 60.0):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / STATE_FILE
        self._lock_path = self.directory / LOCK_FILE
        self.known_hosts_dir = self.directory / KNOWN_HOSTS_DIR
        self._lock_timeout_s = lock_timeout_s

    def read(self) -> State:
        """The current state (no lock needed: writes are atomic replacements)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return State()
        try:
            return State.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as error:
            raise redact.DevopsError(
                f"the state file {self.path} is unreadable ({redact.describe(error)}); move it aside and run "
                "`reap` to find instances it no longer lists"
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a") as lock:
            deadline = time.monotonic() + self._lock_timeout_s
            while True:
                try:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise redact.DevopsError(
                            f"another command has held {self._lock_path} for over {self._lock_timeout_s:.0f} s; "
                            "wait for it to finish (the lock is released when its process exits)"
                        ) from None
                    time.sleep(0.01)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def update(self) -> Iterator[State]:
        """Yields the state under the exclusive lock; writes it back atomically unless the block raises."""
        with self._locked():
            current = self.read()
            yield current
            self._write(current)

    def set(self, label: str, **changes) -> Record:
        """Replaces fields of record `label` under the lock; returns the new record (its note redacted)."""
        if "note" in changes:
            changes["note"] = redact.redact(changes["note"])
        with self.update() as current:
            record = dataclasses.replace(current.records[label], **changes)
            current.records[label] = record
        return record

    def _write(self, current: State) -> None:
        # Private (0600): it names instances, hosts and ports of the user's account.
        records.write_text_atomically(
            str(self.path), json.dumps(current.to_json(), indent=1, sort_keys=True) + "\n", mode=0o600
        )
