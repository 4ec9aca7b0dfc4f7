"""Runs between this machine and the store: `rl-harness sync <run-id>` sends what the store lacks.

    exit_code = transfer.sync(run, artifacts_root=None, connect_store=stores.open_store)   # a finder.Run

The store is the one configured (docs/artifact_storage.md), checked as a run checks it at start. A
run prefix that holds another run's records (another run id, or the same id started at another
time) is never written to.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from typing import Callable, Optional

from rl.harness.errors import EXIT_UPLOAD_FAILED, UsageError
from rl.harness.remote import run_mirror, stores
from rl.harness.remote.store import Store, UploadError
from rl.harness.run import records
from rl.harness.run.finder import Run
from rl.harness.run.layout import RunLayout


def configured_store(connect_store: Callable = stores.open_store) -> Store:
    """The configured store, checked; UsageError naming the fix when there is none or it cannot be used."""
    config = stores.load()
    if config is None:
        raise UsageError(f"no store is configured: {stores.NO_STORE_FIX}")
    store = connect_store(config)
    store.check()
    return store


def check_owner(store: Store, run_prefix: str, run: Run) -> None:
    """UsageError when the store's records at `run_prefix` are another run's."""
    key = f"{run_prefix}/results/{records.MANIFEST_FILE}"
    if key not in store.list_keys(f"{run_prefix}/results"):
        return
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / records.MANIFEST_FILE
        store.get_file(key, str(path))
        try:
            remote = json.loads(path.read_text())
        except ValueError:
            remote = {}
    if (remote.get("run_id"), remote.get("started_at")) != (run.run_id, run.manifest.started_at):
        raise UsageError(f"store {store.config.scheme}://{store.config.bucket}/{run_prefix} holds another run's"
                         " records, which are never overwritten; sync a run from its own results folder")


def sync(run: Run, *, artifacts_root: Optional[pathlib.Path], connect_store: Callable = stores.open_store) -> int:
    """Sends what the store lacks of `run`; prints one line; 0, or EXIT_UPLOAD_FAILED if a file would not go."""
    store = configured_store(connect_store)
    layout = RunLayout.of_run(run.run_dir, run.manifest, artifacts_root)
    experiment = run.manifest.experiment.module
    check_owner(store, layout.remote_prefix(store.config.prefix, experiment), run)
    try:
        record = run_mirror.upload_run(store, experiment=experiment, layout=layout)
    except UploadError as error:
        print(f"sync of run {run.run_id} stopped, the rest stays local: {error}")
        return EXIT_UPLOAD_FAILED
    print(f"run {run.run_id}: {len(record['files'])} files in {store.config.scheme}://{store.config.bucket}/"
          f"{record['run_prefix']}, verified by sha256")
    return 0
