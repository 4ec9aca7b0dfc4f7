"""A run's checkpoints, found from its records (rl.harness: results/<run-id>/run_manifest.json).

    from rl.analysis.checkpoints import find_checkpoints

    found = find_checkpoints("20261201T011500Z-3f9a2c", roots=["experiments/mess3"])
    found.run.manifest, found.artifacts_dir             # the harness's Run; artifacts/<run-id>
    found.checkpoints[-1].path        # artifacts/<run-id>/checkpoints/iter_000010 (an RLlib checkpoint)
    found.checkpoints[-1].iteration, found.checkpoints[-1].env_steps

    found = from_context(context)     # inside a recipe: the running run's own records, no search
    found.stop_signal()               # inside a recipe: "SIGINT" once one arrived (probing then stops), else None

The manifest lists checkpoints relative to the run's artifacts folder. That folder is looked
for where `rl.harness.run.layout.RunLayout.artifact_places` says: beside the results folder, then
under `artifacts_root`; never where the manifest recorded it, when that lies elsewhere, since
checkpoints are code (pickles). A recorded checkpoint path must stay inside that folder
(RecordError otherwise).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Callable, Iterable

from rl.harness import Run, RunLayout, UsageError, find_run
from rl.harness.run import layout as run_layout


class CheckpointNotFound(UsageError, LookupError):
    """The run has no checkpoint on this machine; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class RunCheckpoint:
    path: pathlib.Path
    iteration: int | None
    env_steps: int | None
    trial_id: str | None = None  # Tune runs

    @property
    def name(self) -> str:
        """A label unique within the run, e.g. `iter_000010` or `<trial>/checkpoint_000003`."""
        return f"{self.trial_id}/{self.path.name}" if self.trial_id else self.path.name


def _no_signal() -> str | None:
    return None


@dataclasses.dataclass(frozen=True)
class RunArtifacts:
    run: Run
    artifacts_dir: pathlib.Path
    checkpoints: list[RunCheckpoint]  # oldest first (per Tune trial)
    # The SIGINT/SIGTERM that asked the running run to stop, or None: long analyses of it stop early.
    stop_signal: Callable[[], str | None] = dataclasses.field(default=_no_signal, compare=False, repr=False)


def _sorted(checkpoints: list[RunCheckpoint]) -> list[RunCheckpoint]:
    return sorted(checkpoints, key=lambda c: (c.trial_id or "", c.iteration or 0, c.path.name))


def from_context(context) -> RunArtifacts:
    """The running run's checkpoints so far, from its RunContext (its manifest in memory, nothing searched).

    Raises CheckpointNotFound when it saved none yet.
    """
    entries = context.checkpoints()
    if not entries:
        raise CheckpointNotFound(
            f"run {context.run_id} saved no checkpoint yet; analyse it after training, which"
            " checkpoints at the end (rl.harness.training.runners)"
        )
    run = Run(run_dir=str(context.results_dir), manifest=context.recorder.manifest)
    checkpoints = [
        RunCheckpoint(context.checkpoint_path(entry), entry.iteration, entry.env_steps, entry.trial_id)
        for entry in entries
    ]
    return RunArtifacts(
        run, pathlib.Path(context.artifacts_dir), _sorted(checkpoints), stop_signal=lambda: context.recorder.stop_signal
    )


def find_checkpoints(run_id: str, *, roots: Iterable[str], artifacts_root: str | None = None) -> RunArtifacts:
    """The run (found by rl.harness.find_run), its artifacts folder and its recorded checkpoints.

    Raises CheckpointNotFound (none recorded, or not on this machine) and rl.harness.run.records.RecordError
    (a manifest that does not say where its folders are); both messages name the fix.
    """
    roots = list(roots)
    run = find_run(run_id, roots)
    entries = run.manifest.checkpoints
    if not entries:
        raise CheckpointNotFound(
            f"run {run_id} recorded no checkpoint (status {run.status}); probe a run that saved one "
            "(the harness runners checkpoint every N iterations and at the end)"
        )
    layout = RunLayout.of_run(run.run_dir, run.manifest)
    extra = [pathlib.Path(os.path.expanduser(artifacts_root)).resolve()] if artifacts_root else []
    folders = layout.artifact_places(run.manifest, extra_roots=extra)
    for folder in folders:
        paths = [run_layout.recorded_folder(folder, entry.path, "checkpoint") for entry in entries]
        if all(path.is_dir() for path in paths):
            checkpoints = [
                RunCheckpoint(path, entry.iteration, entry.env_steps, entry.trial_id)
                for path, entry in zip(paths, entries)
            ]
            return RunArtifacts(run, folder, _sorted(checkpoints))
    raise CheckpointNotFound(
        f"the checkpoints of run {run_id} are not on this machine (looked in {', '.join(map(str, folders))}); "
        f"fetch artifacts/{layout.relative} (docs/artifact_storage.md) or pass the artifacts root that holds it"
    )
