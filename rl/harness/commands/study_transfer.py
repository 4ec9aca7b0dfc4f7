"""A study whose home is the store: its own folders mirrored while it runs, its members read from the store,
the whole study fetched back anywhere.

    store = study_transfer.study_store(options)        # None, or the configured store, checked (exit 2 naming the fix)
    with study_transfer.mirrored(store, record, results_root, artifacts_root, resume_command):   # its own folders
        ...                                             # trials, record, summary: sent while they are written
    view = study_transfer.MemberView(store, folder)     # its members' records and metrics, as the store holds them
    view.update(run_ids)                                # then summary.load_member(view.results_root, ...)
    folder = study_transfer.fetch_record(store, study_id, results_root, artifacts_root)   # `study --resume` elsewhere
    folder = study_transfer.gather_shares(store, study_id, results_root, artifacts_root)  # a study run in shares
    exit_code = study_transfer.fetch(identifier, results_dir=None, artifacts_dir=None, records_only=False)   # a study or a run

Keys: a study's own folders are `<prefix>/<study module>/[smoke/]studies/<study-id>/{results,artifacts}/`
(its record, summary and figures; its members' logs and HParams events); each member is an ordinary
run under its recipe's module, mirrored by its own run from whichever machine ran it. The driver reads
its members from the store, never from the disk they were written to, so a cluster shares nothing
but the store (docs/scale_out.md).
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
from collections.abc import Callable, Iterable

from absl import logging

from rl.harness import env_vars
from rl.harness.commands import execution, recipes, transfer
from rl.harness.errors import UsageError
from rl.harness.remote import run_mirror, stores
from rl.harness.remote.run_fetch import FetchError, RemoteRun
from rl.harness.remote.store import Store, UploadError
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.study import shares
from rl.harness.study.record import STUDIES_DIR, StudyRecord

_INDEX = f"/results/{records.REMOTE_ARTIFACTS_FILE}"
# What the study reads of a member's run: its records and its metrics rows (not its checkpoints).
_MEMBER_RECORDS = ("results/", f"artifacts/{records.LINEAGE_METRICS_FILE}", f"artifacts/{records.METRICS_FILE}")


def study_store(options: argparse.Namespace) -> Store | None:
    """The store a study and its members mirror to, as a run decides (`--upload-artifacts`, `--smoke`), checked
    for writing; None without one."""
    config = execution.store_config(options)
    if config is None:
        return None
    store = stores.open_store(config)
    store.check()
    return store


def study_layout(results_root: pathlib.Path, artifacts_root: pathlib.Path, study_id: str, smoke: bool) -> RunLayout:
    """A study's folders (`[smoke/]studies/<study-id>` below each root) as the layout a mirror and a fetch take."""
    below = (records.SMOKE_DIR, STUDIES_DIR) if smoke else (STUDIES_DIR,)
    return RunLayout(pathlib.Path(results_root, *below), pathlib.Path(artifacts_root, *below), study_id, False)


def _key_folder(module: str, smoke: bool) -> str:
    """What a study's prefix is under: `<module>/[smoke/]studies`, as a run's is under its module."""
    return "/".join((module, *((records.SMOKE_DIR,) if smoke else ()), STUDIES_DIR))


def check_free(store: Store, module: str, study_id: str, smoke: bool) -> None:
    """UsageError when the store already holds records of a study with this id (never overwritten)."""
    prefix = "/".join((store.config.prefix, _key_folder(module, smoke), study_id))
    if store.list_keys(prefix):
        raise UsageError(
            f"store {store.config.scheme}://{store.config.bucket}/{prefix} already holds a study's records,"
            f" which are never overwritten; resume it with --resume {study_id} or choose another --study-id"
        )


@contextlib.contextmanager
def mirrored(
    store: Store, record: StudyRecord, results_root: pathlib.Path, artifacts_root: pathlib.Path, resume_command: str
):
    """The study's own folders sent while the block runs (a thread), then drained for at most the mirror's drain
    time; what did not go is named in one line with the command that sends it (`resume_command`)."""
    interval_s, drain_s = env_vars.mirror_seconds()
    layout = study_layout(results_root, artifacts_root, record.study_id, record.smoke)
    mirror = run_mirror.LiveMirror(
        run_mirror.RunMirror(store, layout, _key_folder(record.module, record.smoke)), interval_s=interval_s
    )
    mirror.start()
    try:
        yield
    finally:
        sent = mirror.finish(drain_s=drain_s)
        if sent["status"] != "complete":
            print(
                f"study {record.study_id}: {len(sent['not_uploaded'])} of its files are not in {store.config.url}"
                f" ({sent['error']['message']}); `{resume_command}` sends them",
                file=sys.stderr,
            )


def find_study(store: Store, study_id: str) -> RemoteRun | None:
    """Study `study_id` in the store (its folders, as a `RemoteRun` whose experiment is the study's module), or None."""
    tail = f"/{STUDIES_DIR}/{study_id}{_INDEX}"
    found = []
    for key in store.list_keys(store.config.prefix):
        if key.endswith(tail):
            module, _, below = key[len(store.config.prefix) + 1 : -len(tail)].partition("/")
            if below in ("", records.SMOKE_DIR):
                found.append(RemoteRun(store, key[: -len(_INDEX)], module, bool(below), study_id))
    if len(found) > 1:
        raise UsageError(
            f"the store {store.config.url} holds {len(found)} studies with id {study_id} (of"
            f" {', '.join(study.experiment for study in found)}); fetch them by hand from their prefixes"
        )
    return found[0] if found else None


def fetch_record(
    store: Store, study_id: str, results_root: pathlib.Path, artifacts_root: pathlib.Path
) -> pathlib.Path | None:
    """Study `study_id`'s record and summary from the store into `results_root`, verified: its folder, or None when
    the store holds no such study."""
    remote = find_study(store, study_id)
    if remote is None:
        return None
    layout = study_layout(results_root, artifacts_root, study_id, remote.smoke)
    remote.fetch(layout, only="results/")
    logging.info(
        "study %s is not on this machine: fetched its record from %s into %s, verified",
        study_id,
        store.config.url,
        layout.results_dir,
    )
    return layout.results_dir


def gather_shares(
    store: Store, study_id: str, results_root: pathlib.Path, artifacts_root: pathlib.Path
) -> pathlib.Path | None:
    """Study `study_id` run in shares (`study --share`, study/shares.py): each share's record fetched from the store,
    verified, and the whole study's record written from them into `results_root`; its folder, or None when the store
    holds no share of it."""
    tail = f"/{STUDIES_DIR}/"
    found = sorted(
        {
            key[: -len(_INDEX)].rsplit("/", 1)[-1]
            for key in store.list_keys(store.config.prefix)
            if key.endswith(_INDEX) and tail in key
        }
    )
    share_ids = [candidate for candidate in found if shares.is_share_of(study_id, candidate)]
    if not share_ids:
        return None
    parts = [StudyRecord.read(fetch_record(store, share_id, results_root, artifacts_root)) for share_id in share_ids]
    whole = shares.gather(study_id, parts)
    folder = study_layout(results_root, artifacts_root, study_id, whole.smoke).results_dir
    whole.write(folder)
    logging.info("study %s: gathered from its %d share(s) in %s", study_id, len(parts), store.config.url)
    return folder


class MemberView:
    """A study's members as the store holds them: their records and metrics rows, copied
    into `folder` (the driver's own; a run's folders are never written to) and brought up to date by `update`."""

    def __init__(self, store: Store, folder: pathlib.Path):
        self.store = store
        self.results_root = folder / "results"
        self.artifacts_root = folder / "artifacts"
        self.results_root.mkdir(parents=True, exist_ok=True)

    def update(self, run_ids: Iterable[str]) -> None:
        """Brings `run_ids` up to date with the store (one listing); a run the store lacks yet stays absent."""
        wanted = set(run_ids)
        for remote in RemoteRun.find_all(self.store):
            if remote.run_id in wanted:
                layout = RunLayout(self.results_root, self.artifacts_root, remote.run_id, remote.smoke)
                for only in _MEMBER_RECORDS:
                    remote.fetch(layout, only=only, update=True)

    def try_update(self, run_ids: Iterable[str]) -> str | None:
        """`update`, or the problem when the store fails (the view stays as it was)."""
        try:
            self.update(run_ids)
        except (UploadError, FetchError) as error:
            return str(error)
        return None


def fetch(
    identifier: str,
    *,
    results_dir: pathlib.Path | None,
    artifacts_dir: pathlib.Path | None,
    records_only: bool,
    connect_store: Callable = stores.open_store,
) -> int:
    """`rl-harness fetch <study-id | run-id>`: a study with every member's runs (`records_only`: their results
    folders), into the given roots, else beside the study's module; a run as `transfer.fetch` does."""
    store = transfer.configured_store(connect_store, write=False)
    remote = find_study(store, identifier)
    if remote is None:
        return transfer.fetch(
            identifier,
            results_dir=results_dir,
            artifacts_dir=artifacts_dir,
            records_only=records_only,
            connect_store=connect_store,
        )
    results_root, artifacts_root = recipes.run_roots(results_dir, artifacts_dir, remote.experiment)
    only = "results/" if records_only else ""
    layout = study_layout(results_root, artifacts_root, identifier, remote.smoke)
    fetched, kept = remote.fetch(layout, only=only)
    runs = {run.run_id: run for run in RemoteRun.find_all(store)}
    members = [run_id for member in StudyRecord.read(layout.results_dir).members for run_id in member.runs]
    for run_id in members:
        if run_id in runs:
            counts = runs[run_id].fetch(RunLayout(results_root, artifacts_root, run_id, runs[run_id].smoke), only=only)
            fetched, kept = fetched + counts[0], kept + counts[1]
    missing = [run_id for run_id in members if run_id not in runs]
    print(
        f"study {identifier}: {fetched} files of it and {len(members) - len(missing)} member runs fetched and verified"
        f" by sha256 into {results_root}{'' if records_only else f' and {artifacts_root}'}"
        f"{f'; {kept} already here kept as they are' if kept else ''}"
    )
    if missing:
        print(
            f"study {identifier}: the store holds no run {', '.join(missing)}; sync each from the machine that ran it"
            " (`rl-harness sync <run-id>`)"
        )
    return 0
