"""Where a run's checkpoints are saved: an empty `.partial-*` folder to save into, then its state file and
one rename into place (checkpoints/[<trial>/]<name>), so a checkpoint folder is whole or absent.

    folders = CheckpointFolders(checkpoints_dir, artifacts_dir=..., run_id=run_id, experiment=module)
    with folders.saving(trial=None) as partial:      # removed if the block fails
        algo.save_to_path(partial)
    entry = folders.place(partial, science_name(1), iteration=1, env_steps=500, trial=None, extra={})
    folders.carry(parent_entry)                      # another run's checkpoint (its path a folder), linked in
    folders.remove([older_entry])
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rl.harness.run import records
from rl.harness.run.manifest import CheckpointEntry
from rl.harness.run.status import utc_now

# harness_checkpoint.json keeps its own shape (unchanged by the manifest's schema 2).
CHECKPOINT_STATE_SCHEMA_VERSION = 1
_TRIAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def science_name(iteration: int) -> str:
    """The folder of a science checkpoint: `iter_000010`."""
    return f"iter_{iteration:06d}"


def _link_or_copy(source: str, destination: str) -> None:
    """A hard link (no bytes copied, and the source is never written through it), a copy across devices."""
    try:
        os.link(source, destination)
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(source, destination)


class CheckpointFolders:
    """The checkpoint folders of one run (each line of checkpoints, a trial or an agent, in its own subfolder)."""

    def __init__(
        self, checkpoints_dir: pathlib.Path, *, artifacts_dir: pathlib.Path, run_id: str, experiment: str | None
    ):
        self._checkpoints_dir = checkpoints_dir
        self._artifacts_dir = artifacts_dir
        self._run_id = run_id
        self._experiment = experiment

    @contextlib.contextmanager
    def saving(self, trial: str | None) -> Iterator[pathlib.Path]:
        """Yields an empty `.partial-*` folder to save into; it is removed if the block fails."""
        if trial is not None and not _TRIAL_NAME.match(trial):
            raise ValueError(
                f"checkpoint trial {trial!r} must be a plain folder name (letters, digits, '_', '.', '-'),"
                " e.g. the agent's name"
            )
        partial = pathlib.Path(tempfile.mkdtemp(dir=self._checkpoints_dir, prefix=".partial-"))
        try:
            yield partial
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise

    def place(
        self,
        partial: pathlib.Path,
        name: str,
        *,
        iteration: int,
        env_steps: int | None,
        trial: str | None,
        extra: Mapping[str, Any],
    ) -> CheckpointEntry:
        """Completes a saved folder (its state file, then one rename to checkpoints/[<trial>/]<name>)."""
        state = {
            "schema_version": CHECKPOINT_STATE_SCHEMA_VERSION,
            "run_id": self._run_id,
            "experiment": self._experiment,
            "iteration": iteration,
            "env_steps": env_steps,
            "saved_at": utc_now(),
            **({"trial_id": trial} if trial is not None else {}),
            **extra,
        }
        # A plain write: the folder is private until the rename, which is the atomic step. No fsync of
        # its own either, as for RLlib's files beside it; the manifest that records the folder is fsynced.
        (partial / records.CHECKPOINT_STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        final = (self._checkpoints_dir / trial if trial is not None else self._checkpoints_dir) / name
        final.parent.mkdir(exist_ok=True)
        if final.exists():  # the same iteration saved again (e.g. on interrupt): keep the newest
            shutil.rmtree(final)
        os.rename(partial, final)
        return CheckpointEntry(
            path=str(final.relative_to(self._artifacts_dir)),
            iteration=iteration,
            env_steps=env_steps,
            saved_at=state["saved_at"],
            trial_id=trial,
        )

    def carry(self, entry: CheckpointEntry) -> CheckpointEntry:
        """Another run's science checkpoint (`entry.path`: its folder) as this run's checkpoints/iter_<N>, its files
        linked (`_link_or_copy`) into a `.partial-*` folder and renamed into place, as a saved one is."""
        with self.saving(trial=None) as partial:
            shutil.copytree(entry.path, partial, dirs_exist_ok=True, copy_function=_link_or_copy)
        final = self._checkpoints_dir / science_name(entry.iteration)
        os.rename(partial, final)
        return dataclasses.replace(entry, path=str(final.relative_to(self._artifacts_dir)))

    def entry_of(
        self, path: str, *, iteration: int | None, env_steps: int | None, trial_id: str | None
    ) -> CheckpointEntry:
        """The record of a checkpoint saved by someone else (Tune), where it is."""
        return CheckpointEntry(
            path=os.path.relpath(path, self._artifacts_dir),
            iteration=iteration,
            env_steps=env_steps,
            saved_at=utc_now(),
            trial_id=trial_id,
        )

    def remove(self, entries: Iterable[CheckpointEntry]) -> None:
        for entry in entries:
            shutil.rmtree(self._artifacts_dir / entry.path, ignore_errors=True)
