"""What the store says of a launch's runs: the one place a watcher learns how a run on an instance is going.

    from rl.devops.vast import store_runs

    runs = store_runs.StoreRuns(store)           # a harness `Store` (rl.harness.remote.stores.open_store)
    seen = runs.look(["20261206T090000Z-ab12cd-000"])   # {run_id: RunInStore}, only runs the store holds
    seen[run_id].status, seen[run_id].error, seen[run_id].heartbeat_at, seen[run_id].checkpoint_iteration

A run on an instance mirrors its records and checkpoints to the store as it goes (docs/scale_out.md),
so the store outlives the instance: a replacement resumes from the newest checkpoint found here, and
a run that completed is known to have completed even once its instance has ended itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import tempfile
from collections.abc import Iterable

from rl.devops.vast import redact
from rl.devops.vast.durability import DurabilityError, Secured
from rl.harness.remote import store as remote_store
from rl.harness.remote import stores
from rl.harness.run import records


@dataclasses.dataclass(frozen=True)
class RunInStore:
    run_id: str
    status: str | None  # the manifest's: running, completed, failed, interrupted, ...
    error: str  # "<type>: <message>" of a failed run, else ""
    heartbeat_at: float | None  # epoch seconds of the run's last heartbeat
    checkpoint_iteration: int | None  # the newest checkpoint's iteration (science or rolling), None if none
    remote_complete: bool  # the store's index of the run says complete: its mirror drained


def epoch(text: str | None) -> float | None:
    try:
        return datetime.datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


def _from_manifest(run_id: str, manifest: dict, index: dict, run_prefix: str, keys: set[str]) -> RunInStore:
    """Only a checkpoint whose files reached the store counts: the manifest may be sent before them."""
    error = manifest.get("error") or {}
    checkpoints = [*(manifest.get("checkpoints") or ()), *(manifest.get("rolling_checkpoints") or ())]
    iterations = [
        entry.get("iteration")
        for entry in checkpoints
        if isinstance(entry.get("iteration"), int)
        and f"{run_prefix}/artifacts/{entry.get('path')}/{records.CHECKPOINT_STATE_FILE}" in keys
    ]
    return RunInStore(
        run_id=run_id,
        status=manifest.get("status"),
        error=f"{error.get('type')}: {error.get('message')}" if error else "",
        heartbeat_at=epoch((manifest.get("heartbeat") or {}).get("at")),
        checkpoint_iteration=max(iterations) if iterations else None,
        remote_complete=index.get("status") == "complete",
    )


class StoreRuns:
    def __init__(self, store: remote_store.Store):
        self.store = store

    def look(self, run_ids: Iterable[str]) -> dict[str, RunInStore]:
        """The runs among `run_ids` whose manifest the store holds; one listing of the store's prefix."""
        wanted = set(run_ids)
        tail = f"/results/{records.MANIFEST_FILE}"
        found = {}
        with redact.guarded("read the runs in the store"):
            keys = set(self.store.list_keys(self.store.config.prefix))
            for key in keys:
                run_prefix = key[: -len(tail)] if key.endswith(tail) else ""
                run_id = run_prefix.rsplit("/", 1)[-1]
                if run_id in wanted:
                    index_key = f"{run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}"
                    index = self.read_json(index_key) if index_key in keys else {}
                    found[run_id] = _from_manifest(run_id, self.read_json(key), index, run_prefix, keys)
        return found

    def resumable(self, run_ids: list[str]) -> str | None:
        """The newest of `run_ids` (oldest first) with a checkpoint in the store, or None."""
        seen = self.look(run_ids)
        return next(
            (
                run_id
                for run_id in reversed(run_ids)
                if run_id in seen and seen[run_id].checkpoint_iteration is not None
            ),
            None,
        )

    def continue_with(self, run_id: str) -> str:
        """How the operator continues run `run_id` (of a share the watcher stopped)."""
        return f"--resume-from {run_id}"

    def read_json(self, key: str) -> dict:
        with tempfile.TemporaryDirectory() as folder:
            path = pathlib.Path(folder) / "object.json"
            self.store.get_file(key, str(path))
            try:
                return json.loads(path.read_text())
            except ValueError:
                return {}


def open_configured(*, write: bool = False) -> remote_store.Store:
    """The store configured on this machine (rl.harness.remote.stores), checked; DevopsError naming the fix."""
    with redact.guarded("open the store"):
        config = stores.load()
        if config is None:
            raise redact.DevopsError(f"no store is configured: {stores.NO_STORE_FIX}")
        store = stores.open_store(config)
        store.check(write=write)
    return store


class StoreSink:
    """The durability gate of a managed launch's instance: its run ended and its mirror drained into the store."""

    upload_artifacts = True

    def __init__(self, runs: StoreRuns):
        self.runs = runs

    @classmethod
    def configured(cls) -> StoreSink:
        return cls(StoreRuns(open_configured()))

    def instance_env(self, *, launch_id: str, valid_for_s: int) -> dict[str, str]:
        raise redact.DevopsError("a managed launch's instances get the key of --instance-store-file, not this one")

    def secure(self, record, row: dict) -> Secured:
        run = self.runs.look([record.run_id]).get(record.run_id)
        if run is None or run.status in (None, "running") or not run.remote_complete:
            raise DurabilityError(
                f"run {record.run_id} is not complete in the store yet (status "
                f"{getattr(run, 'status', None)!r}); wait, or run `watch {record.launch_id}`"
            )
        return Secured(files=0, bytes=0, summary=f"run {run.status} and mirrored to {self.runs.store.config.url}")
