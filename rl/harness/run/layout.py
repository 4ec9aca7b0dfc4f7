"""Where one run's records live: `[smoke/]<run-id>` under a results root and an artifacts root.

    from rl.harness.run.layout import RunLayout

    layout = RunLayout(results_root, artifacts_root, run_id="20261201T011500Z-3f9a2c", smoke=True)
    layout.results_dir       # <results-root>/smoke/<run-id>   (small, committed)
    layout.artifacts_dir     # <artifacts-root>/smoke/<run-id> (large, git-ignored)
    layout.checkpoints_dir   # <artifacts-root>/smoke/<run-id>/checkpoints
    layout.claim()           # creates both folders, each only if new: RunIdTaken if another run has the id
                             # (RunFolderError if they cannot be made)
    layout.mark_roots()      # creates both roots, marked as outputs (provenance leaves them out)
    layout.remote_prefix("runs", "experiments.mess3.reward_only")   # "runs/experiments.mess3.reward_only/smoke/<id>"

    layout = RunLayout.of_run(run_dir, manifest)    # back from a recorded run; smoke from its manifest
    layout.artifact_places(manifest)                # where its artifacts may be on this machine, best first
                                                    # (under the roots given here, never where the record says)
    run_folder_part("results/smoke/<id>/summary.json", "<id>")   # ("results", "summary.json")
    recorded_folder(layout.artifacts_dir, entry.path, "checkpoint")  # RecordError if it leads outside

This module is the only place that knows the folder rule; everything else asks it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from rl.harness.errors import UsageError
from rl.harness.run import records
from rl.harness.run.status import run_id_problem


class RecordedRun(Protocol):
    """What a layout reads of a recorded run (a `RunManifest` is one): its id, smoke flag and recorded paths."""

    run_id: str | None
    paths: Mapping[str, Any]

    @property
    def smoke(self) -> bool: ...


# By convention a results root has its artifacts root beside it: <x>/results and <x>/artifacts.
ARTIFACTS_BESIDE_RESULTS = "artifacts"
COMPARISONS_DIR = "comparisons"  # in a results root: `compare`'s figures made without --output
GITIGNORE = ".gitignore"
# Beside each root's marker unless the root has its own: what `git status` leaves out there. Results are
# committed, but not the harness's marker, this file or the figures `compare` makes on demand; artifacts never.
_RESULTS_GITIGNORE = (
    f"# rl-harness: its marker, this file and compare's figures are not results to commit\n"
    f"/{records.OUTPUT_ROOT_MARKER}\n/{GITIGNORE}\n/{COMPARISONS_DIR}/\n"
)
_ARTIFACTS_GITIGNORE = "# rl-harness: artifacts (metrics, checkpoints, Tune storage) stay out of git\n*\n"
OUTPUT_ROOT_NOTE = (
    "This folder is an rl-harness results or artifacts root. Runs' records are outputs, not code:\n"
    "provenance leaves this folder out of a run's dirty flag, code hash and patch (rl/harness/run/provenance.py).\n"
)


class RunIdTaken(UsageError):
    """A run's folder exists already (another run has its id, or claimed it a moment ago)."""

    def __init__(self, folder: pathlib.Path):
        super().__init__(f"{folder} already exists; choose another --run-id (or omit it)")


class RunFolderError(UsageError):
    """A run's folder could not be created (a read-only or full file system): nothing of the run was made."""

    def __init__(self, error: OSError):
        super().__init__(
            f"cannot create {error.filename}: {error.strerror}; pass a writable --results-dir and --artifacts-dir"
        )


def _claim_folder(folder: pathlib.Path) -> None:
    try:
        folder.mkdir()
    except FileExistsError:
        raise RunIdTaken(folder) from None


def relative_run_path(run_id: str, smoke: bool) -> pathlib.PurePosixPath:
    """`smoke/<run-id>` or `<run-id>`: a run's folder below either root."""
    return pathlib.PurePosixPath(*([records.SMOKE_DIR] if smoke else []), run_id)


def _root_of(folder: pathlib.Path, relative: pathlib.PurePosixPath, what: str) -> pathlib.Path:
    """The root above `folder` = <root>/<relative>; RecordError if the folder is not laid out so."""
    depth = len(relative.parts)
    if folder.parts[-depth:] != relative.parts:
        raise records.RecordError(
            f"{what} {folder} does not end in {relative}, as its manifest implies (run id,"
            " smoke switch); give the folder its run's name again (under smoke/ for a smoke run)"
        )
    return folder.parents[depth - 1]


@dataclasses.dataclass(frozen=True)
class RunLayout:
    """The folders of one run (absolute roots; nothing is created here)."""

    results_root: pathlib.Path
    artifacts_root: pathlib.Path
    run_id: str
    smoke: bool

    @property
    def relative(self) -> pathlib.PurePosixPath:
        return relative_run_path(self.run_id, self.smoke)

    @property
    def results_dir(self) -> pathlib.Path:
        return self.results_root / self.relative

    @property
    def artifacts_dir(self) -> pathlib.Path:
        return self.artifacts_root / self.relative

    @property
    def checkpoints_dir(self) -> pathlib.Path:
        return self.artifacts_dir / records.CHECKPOINTS_DIR

    def claim(self) -> None:
        """Creates the results and the artifacts folder, each only if it does not exist: the run id's claim.

        `mkdir` is atomic, so of two runs started at once with one id exactly one gets both folders;
        the other gets RunIdTaken and leaves nothing behind (a results folder it made is removed again).
        Any other failure to create them is a RunFolderError, also leaving nothing behind.
        """
        try:
            for folder in (self.results_dir, self.artifacts_dir):
                folder.parent.mkdir(parents=True, exist_ok=True)
            _claim_folder(self.results_dir)
        except OSError as error:
            raise RunFolderError(error) from None
        try:
            _claim_folder(self.artifacts_dir)
        except BaseException as error:
            self.results_dir.rmdir()
            if isinstance(error, OSError):
                raise RunFolderError(error) from None
            raise

    def mark_roots(self) -> None:
        """Creates both roots, each holding `records.OUTPUT_ROOT_MARKER` (provenance leaves them out whatever their
        names) and, unless it has one, a `.gitignore`: `git status` shows no marker, no artifact and no figure
        of `compare`, only the results to commit."""
        for root, ignored in ((self.results_root, _RESULTS_GITIGNORE), (self.artifacts_root, _ARTIFACTS_GITIGNORE)):
            root.mkdir(parents=True, exist_ok=True)
            for name, text in ((records.OUTPUT_ROOT_MARKER, OUTPUT_ROOT_NOTE), (GITIGNORE, ignored)):
                if not (root / name).exists():
                    records.write_text_atomically(str(root / name), text)

    def with_run_id(self, run_id: str) -> RunLayout:
        """A sibling run in the same roots (a resumed run or a reproduction)."""
        return dataclasses.replace(self, run_id=run_id)

    def remote_prefix(self, prefix: str, experiment: str) -> str:
        """The B2 key folder of this run: `<prefix>/<experiment module>/[smoke/]<run-id>`."""
        return "/".join([prefix.strip("/"), experiment, *self.relative.parts])

    def artifact_places(self, manifest: RecordedRun, extra_roots: Iterable[pathlib.Path] = ()) -> list[pathlib.Path]:
        """Folders that may hold this run's artifacts, best first: under this layout's artifacts root, beside
        the results root (`<x>/artifacts` for `<x>/results`: a copied checkout), then under each extra root.

        Never the folder the manifest recorded when it lies elsewhere: a shared record may name any
        folder, and a checkpoint there is code (pickles) that loading would run (docs/harness.md, Trust).
        """
        roots = [
            self.artifacts_root,
            self.results_root.parent / ARTIFACTS_BESIDE_RESULTS,
            *map(pathlib.Path, extra_roots),
        ]
        return list(dict.fromkeys(root / self.relative for root in roots))

    @classmethod
    def of_run(cls, run_dir, manifest: RecordedRun, artifacts_root: pathlib.Path | None = None) -> RunLayout:
        """The layout of a recorded run from its results folder and manifest.

        The artifacts root is `artifacts_root` if given (a root the user gave on this machine), else
        `artifacts/` beside the results root; the root the manifest recorded is only compared
        (`recorded_elsewhere`), never followed.
        """
        run_id, smoke = manifest.run_id, manifest.smoke
        if not isinstance(run_id, str) or run_id_problem(run_id):
            raise records.RecordError(
                f"the manifest in {run_dir} records no valid run_id ({run_id!r}), so where its"
                " folders are is unknown; it was not written by rl-harness (or was edited)"
            )
        relative = relative_run_path(run_id, smoke)
        results_root = _root_of(pathlib.Path(run_dir).resolve(), relative, "results folder")
        return cls(
            results_root, pathlib.Path(artifacts_root or results_root.parent / ARTIFACTS_BESIDE_RESULTS), run_id, smoke
        )

    def recorded_elsewhere(self, manifest: RecordedRun) -> pathlib.Path | None:
        """The artifacts folder the manifest recorded when it is not this layout's, else None.

        Where a run of this machine wrote with `--artifacts-dir` away from its results, the user
        passes that root again; a shared run's record names a folder of another machine (or a planted one).
        """
        recorded = manifest.paths.get("artifacts")
        if not isinstance(recorded, str) or not recorded:
            return None
        recorded_path = pathlib.Path(recorded)
        return None if recorded_path.resolve() == self.artifacts_dir.resolve() else recorded_path

    @classmethod
    def find(cls, results_root: pathlib.Path, run_id: str) -> pathlib.Path | None:
        """The results folder of run `run_id` under `results_root` (smoke or not), or None."""
        for smoke in (False, True):
            folder = pathlib.Path(results_root) / relative_run_path(run_id, smoke)
            if (folder / records.MANIFEST_FILE).exists():
                return folder
        return None


def recorded_folder(folder: pathlib.Path, recorded: object, what: str) -> pathlib.Path:
    """`folder / recorded` for a path a manifest records relative to `folder` (a checkpoint, Tune's storage).

    RecordError unless it is a relative path that stays inside `folder`, symbolic links followed:
    a checkpoint is code (pickles), so an edited record must not lead the loader elsewhere.
    """
    if not isinstance(recorded, str) or not recorded or pathlib.PurePath(recorded).is_absolute():
        raise records.RecordError(
            f"the manifest records {what} {recorded!r}, not a path relative to the run's"
            " artifacts folder; the record was edited: restore it from git or B2"
        )
    path = folder / recorded
    if not path.resolve().is_relative_to(folder.resolve()):
        raise records.RecordError(
            f"the manifest's {what} {recorded!r} leads outside the run's artifacts folder"
            f" {folder}; the record was edited: restore it from git or B2"
        )
    return path


def outside_trees(path: pathlib.Path, trees: Iterable[pathlib.Path]) -> bool:
    """True when `path` (links followed) lies inside none of `trees`."""
    resolved = pathlib.Path(path).resolve()
    return not any(resolved.is_relative_to(pathlib.Path(tree).resolve()) for tree in trees)


def iter_run_dirs(results_root: str) -> Iterable[str]:
    """`<root>/<run-id>` and `<root>/smoke/<run-id>` folders that hold a manifest, in name order."""
    for folder in (results_root, os.path.join(results_root, records.SMOKE_DIR)):
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            run_dir = os.path.join(folder, name)
            if os.path.isfile(os.path.join(run_dir, records.MANIFEST_FILE)):
                yield run_dir


def run_folder_part(path: str, run_id: str) -> tuple[str, str] | None:
    """(kind, path inside the run's folder) for a `<kind>/[smoke/]<run-id>/<inside>` path, else None.

    `kind` is `results` or `artifacts`, as in a copy of a run's two folders.
    """
    parts = pathlib.PurePosixPath(path).parts
    for smoke in (False, True):
        relative = relative_run_path(run_id, smoke).parts
        depth = len(relative)
        if len(parts) > depth + 1 and parts[1 : depth + 1] == relative:
            return parts[0], "/".join(parts[depth + 1 :])
    return None
