"""Runs between this machine and the store: `sync` sends what the store lacks, `fetch` brings a run back,
`runs --store` lists what the store holds, and `--resume-from` fetches a run's records and its newest checkpoint that
are not here.

    exit_code = transfer.sync(run, artifacts_root=None, connect_store=stores.open_store)   # a finder.Run
    exit_code = transfer.fetch("20261201T011500Z-3f9a2c", results_dir=None, artifacts_dir=None, records_only=False)
    lines = transfer.list_store()
    run_dir = transfer.fetch_records("20261201T011500Z-3f9a2c", results_root, artifacts_root)  # --resume-from elsewhere

The store is the one configured (docs/artifact_storage.md), checked as a run checks it at start. A
run prefix that holds another run's records (another run id, or the same id started at another
time) is never written to.
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from collections.abc import Callable

from absl import logging

from rl.harness.commands import recipes
from rl.harness.errors import EXIT_UPLOAD_FAILED, UsageError
from rl.harness.remote import run_mirror, stores
from rl.harness.remote.run_fetch import FetchError, RemoteRun
from rl.harness.remote.store import Store, UploadError
from rl.harness.run import records
from rl.harness.run.finder import Run
from rl.harness.run.layout import RunLayout


def configured_store(connect_store: Callable = stores.open_store, *, write: bool = True) -> Store:
    """The configured store, checked (for writing too with `write`); UsageError naming the fix when there is
    none or it cannot be used."""
    config = stores.load()
    if config is None:
        raise UsageError(f"no store is configured: {stores.NO_STORE_FIX}")
    store = connect_store(config)
    store.check(write=write)
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
        raise UsageError(
            f"store {store.config.scheme}://{store.config.bucket}/{run_prefix} holds another run's"
            " records, which are never overwritten; sync a run from its own results folder"
        )


def sync(run: Run, *, artifacts_root: pathlib.Path | None, connect_store: Callable = stores.open_store) -> int:
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
    print(
        f"run {run.run_id}: {len(record['files'])} files in {store.config.scheme}://{store.config.bucket}/"
        f"{record['run_prefix']}, verified by sha256"
    )
    return 0


def fetch(
    run_id: str,
    *,
    results_dir: pathlib.Path | None,
    artifacts_dir: pathlib.Path | None,
    records_only: bool,
    connect_store: Callable = stores.open_store,
) -> int:
    """Brings run `run_id` from the store into the results and artifacts roots (the given ones, else beside its
    recipe), verified; prints one line."""
    remote = RemoteRun.find(configured_store(connect_store, write=False), run_id)
    layout = RunLayout(*recipes.run_roots(results_dir, artifacts_dir, remote.experiment), run_id, remote.smoke)
    fetched, kept = remote.fetch(layout, only="results/" if records_only else "")
    print(
        f"run {run_id}: {fetched} files fetched and verified by sha256 into {layout.results_dir}"
        f"{'' if records_only else f' and {layout.artifacts_dir}'}"
        f"{f'; {kept} already here kept as they are' if kept else ''}"
    )
    return 0


def list_store(connect_store: Callable = stores.open_store) -> list[str]:
    """`runs --store`: one line per run the store holds."""
    store = configured_store(connect_store, write=False)
    runs = RemoteRun.find_all(store)
    lines = [f"{run.run_id}  {run.experiment}{'  smoke' if run.smoke else ''}" for run in runs]
    return lines + [f"{len(runs)} runs in {store.config.url}"]


def stored_run(run_id: str) -> RemoteRun | None:
    """Run `run_id` in the configured store; None when no store is configured or it holds no such run."""
    if stores.load() is None:
        return None
    store = configured_store(write=False)
    if not any(remote.run_id == run_id for remote in RemoteRun.find_all(store)):
        return None
    return RemoteRun.find(store, run_id)


def fetch_records(run_id: str, results_root: pathlib.Path, artifacts_root: pathlib.Path) -> pathlib.Path | None:
    """The results folder of run `run_id`, its records fetched from the configured store (verified) into
    `results_root`; None when the store does not have them (`--resume-from` in a fresh clone)."""
    remote = stored_run(run_id)
    if remote is None:
        return None
    layout = RunLayout(results_root, artifacts_root, run_id, remote.smoke)
    remote.fetch(layout, only="results/")
    return layout.results_dir


def fetch_artifacts(layout: RunLayout, folder: str) -> bool:
    """`folder` (inside the run's artifacts folder: a Tune run's storage) fetched from the configured store into
    `layout`, verified; False when no store is configured. UsageError when the store lacks the run or the folder."""
    if stores.load() is None:
        return False
    store = configured_store(write=False)
    remote = RemoteRun.find(store, layout.run_id)
    fetched, _ = remote.fetch(layout, only=f"artifacts/{folder.strip('/')}/")
    if not fetched and not (layout.artifacts_dir / folder).is_dir():
        raise UsageError(
            f"run {layout.run_id} has no artifacts/{folder} in {store.config.url};"
            f" run `rl-harness sync {layout.run_id}` where the run is"
        )
    return True


def fetch_newest_checkpoint(layout: RunLayout) -> pathlib.Path | None:
    """The newest checkpoint of run `layout.run_id`'s own line that is whole in the configured store, fetched into
    `layout`'s artifacts folder and verified (sha256), or None when no store is configured; UsageError when the
    store holds none that verifies. The store's index, not the run's manifest, says which: the manifest in the
    store may lag the checkpoints there (a run lost mid-pass of its mirror).

    The run's metrics files come with it where this machine lacks them: a resumed run carries its
    lineage's rows up to the checkpoint, so its curve joins its parent's.
    """
    if stores.load() is None:
        return None
    store = configured_store(write=False)
    remote = RemoteRun.find(store, layout.run_id)
    for _, checkpoint in remote.complete_checkpoints():
        try:
            remote.fetch(layout, only=f"artifacts/{checkpoint}/")
        except FetchError as error:
            logging.warning(
                "checkpoint %s of run %s is not usable (%s); trying an older one", checkpoint, layout.run_id, error
            )
            continue
        for metrics in (records.LINEAGE_METRICS_FILE, records.METRICS_FILE):
            remote.fetch(layout, only=f"artifacts/{metrics}")
        return layout.artifacts_dir / checkpoint
    raise UsageError(
        f"run {layout.run_id} has no whole checkpoint in {store.config.url};"
        f" run `rl-harness sync {layout.run_id}` where the run is, or start a new run"
    )
