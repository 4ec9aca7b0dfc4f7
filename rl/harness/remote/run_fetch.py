"""A run brought back from the store into this machine's results and artifacts roots, verified.

    remote = run_fetch.RemoteRun.find(store, "20261201T011500Z-3f9a2c")       # UsageError if the store lacks it
    remote.fetch(RunLayout(results_root, artifacts_root, remote.run_id, remote.smoke))
    remote.fetch(layout, only="artifacts/checkpoints/iter_000010/")         # one checkpoint (--resume-from)
    remote.complete_checkpoints()      # [(36, "checkpoints/rolling_iter_000036"), ...]: newest first
    remote.fetch(view, only="results/", update=True)   # a copy of a run still going, brought up to date

Every file is checked against the store's index (`results/remote_artifacts.json`, which the mirror
writes): its key, size and sha256, or those of the `replacement` the index announced (a run killed
while the mirror sent a newer copy leaves either one in the store). A file lands only under the
layout's folders, which come from the roots the user gave on this machine; an index entry that would
land elsewhere (`..`, an absolute path, a key outside the run's prefix) is refused, never followed
(docs/harness.md, Trust). A checkpoint folder is downloaded into a hidden `.partial-*` folder and
renamed into place when complete, as a run saves one; a file that already exists here is kept as it
is, unless `update` asks for a copy that follows the store (never a run's own folders: a study's view
of its members).
"""

from __future__ import annotations

import json
import pathlib
import re
import tempfile

from rl.harness.errors import EXIT_UPLOAD_FAILED, HarnessError, UsageError
from rl.harness.remote.run_mirror import sha256_of_prefix
from rl.harness.remote.store import Store
from rl.harness.run import records
from rl.harness.run.layout import RunLayout

_KINDS = ("artifacts", "results")
# A checkpoint of the run's own line (not a trial's): science (iter_N) or rolling (rolling_iter_N).
_OWN_CHECKPOINT_STATE = re.compile(
    rf"artifacts/(checkpoints/(?:rolling_)?iter_(\d+))/{re.escape(records.CHECKPOINT_STATE_FILE)}"
)


class FetchError(HarnessError, RuntimeError):
    """A fetched file did not match the store's index (size or sha256): it was not kept."""

    exit_status = EXIT_UPLOAD_FAILED


class RemoteRun:
    """One run in the store: its prefix, experiment, whether smoke, and its index's entries."""

    def __init__(self, store: Store, run_prefix: str, experiment: str, smoke: bool, run_id: str):
        self.store, self.run_prefix, self.experiment, self.smoke, self.run_id = (
            store,
            run_prefix,
            experiment,
            smoke,
            run_id,
        )
        self._entries: list[dict] | None = None

    @classmethod
    def find_all(cls, store: Store) -> list[RemoteRun]:
        """Every run with an index under the store's prefix, by run id."""
        index_tail = f"/results/{records.REMOTE_ARTIFACTS_FILE}"
        found = []
        for key in store.list_keys(store.config.prefix):
            if not key.endswith(index_tail):
                continue
            parts = key[len(store.config.prefix) + 1 : -len(index_tail)].split("/")
            if len(parts) == 2 or (len(parts) == 3 and parts[1] == "smoke"):
                found.append(cls(store, key[: -len(index_tail)], parts[0], len(parts) == 3, parts[-1]))
        return sorted(found, key=lambda run: run.run_id)

    @classmethod
    def find(cls, store: Store, run_id: str) -> RemoteRun:
        matches = [run for run in cls.find_all(store) if run.run_id == run_id]
        if len(matches) != 1:
            where = f"{store.config.scheme}://{store.config.bucket}/{store.config.prefix}"
            problem = "holds no run" if not matches else f"holds {len(matches)} runs"
            raise UsageError(f"the store {where} {problem} with id {run_id}; `rl-harness runs --store` lists its runs")
        return matches[0]

    def entries(self) -> list[dict]:
        """The index's files, each checked to lie inside this run's prefix and folders."""
        if self._entries is None:
            with tempfile.TemporaryDirectory() as folder:
                path = pathlib.Path(folder) / records.REMOTE_ARTIFACTS_FILE
                self.store.get_file(f"{self.run_prefix}/results/{records.REMOTE_ARTIFACTS_FILE}", str(path))
                try:
                    files = json.loads(path.read_text())["files"]
                except (ValueError, KeyError, TypeError):
                    raise FetchError(
                        f"the store's index of run {self.run_id} is not readable; run `rl-harness sync"
                        f" {self.run_id}` where the run is"
                    ) from None
            for entry in files:
                parts = pathlib.PurePosixPath(str(entry.get("local", ""))).parts
                if (
                    len(parts) < 2
                    or parts[0] not in _KINDS
                    or any(part in ("..", ".", "") for part in parts)
                    or entry.get("key") != f"{self.run_prefix}/{entry['local']}"
                ):
                    raise FetchError(
                        f"the store's index of run {self.run_id} names {entry.get('local')!r} at"
                        f" {entry.get('key')!r}, outside the run's folders; nothing was fetched"
                    )
            self._entries = files
        return self._entries

    def complete_checkpoints(self) -> list[tuple[int, str]]:
        """(iteration, folder inside the artifacts) of each checkpoint of the run's own line that is whole in the
        store, newest first. The mirror sends a checkpoint's state file after the rest of its folder, so an
        indexed state file means every file of the folder is indexed; the index may be ahead of the records."""
        found = [_OWN_CHECKPOINT_STATE.fullmatch(entry["local"]) for entry in self.entries()]
        return sorted(((int(match[2]), match[1]) for match in found if match), reverse=True)

    def fetch(self, layout: RunLayout, *, only: str = "", update: bool = False) -> tuple[int, int]:
        """Downloads the entries whose local path starts with `only` into `layout`; returns (fetched, kept here).
        With `update`, a file here that differs from the index (size or sha256) is downloaded again."""
        wanted = [entry for entry in self.entries() if entry["local"].startswith(only)]
        checkpoints = {
            str(pathlib.PurePosixPath(entry["local"]).parent)
            for entry in wanted
            if entry["local"].endswith("/" + records.CHECKPOINT_STATE_FILE)
        }
        fetched = kept = 0
        for folder in sorted(checkpoints):
            target = self._local(layout, folder)
            members = [entry for entry in wanted if entry["local"].startswith(folder + "/")]
            wanted = [entry for entry in wanted if entry not in members]
            if target.exists():
                kept += len(members)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = pathlib.Path(tempfile.mkdtemp(dir=target.parent, prefix=".partial-"))
            for entry in members:
                self._download(entry, partial / entry["local"][len(folder) + 1 :])
            partial.rename(target)
            fetched += len(members)
        for entry in wanted:
            target = self._local(layout, entry["local"])
            if target.exists() and not (update and _differs(target, entry)):
                kept += 1
                continue
            self._download(entry, target)
            fetched += 1
        return fetched, kept

    @staticmethod
    def _local(layout: RunLayout, local: str) -> pathlib.Path:
        kind, rest = local.split("/", 1)
        return (layout.artifacts_dir if kind == "artifacts" else layout.results_dir) / rest

    def _download(self, entry: dict, target: pathlib.Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".tmp-fetch-{target.name}"
        self.store.get_file(entry["key"], str(temporary))
        size = temporary.stat().st_size
        # A growing file (metrics, events) may be in the store longer than its index says: its indexed
        # prefix is what is verified, and kept.
        matched = next(
            (
                version["size"]
                for version in (entry.get("replacement"), entry)
                if version is not None
                and size >= version["size"]
                and sha256_of_prefix(temporary, version["size"]) == version["sha256"]
            ),
            None,
        )
        if matched is None:
            temporary.unlink()
            raise FetchError(
                f"{entry['key']} in the store does not match its index (size or sha256): not kept;"
                f" run `rl-harness sync {self.run_id}` where the run is, then fetch again"
            )
        if size > matched:
            with open(temporary, "r+b") as handle:
                handle.truncate(matched)
        temporary.replace(target)


def _differs(path: pathlib.Path, entry: dict) -> bool:
    return path.stat().st_size != entry["size"] or sha256_of_prefix(path, entry["size"]) != entry["sha256"]
