"""What `--resume-from` names: a checkpoint folder, or a previous run whose newest checkpoint is found (here, else
fetched from the configured store with the run's records).

    from rl.harness.commands import resume

    source = resume.resolve_resume("20261201T011500Z-3f9a2c", results_root, artifacts_root)   # its newest checkpoint
    logging.info(resume.describe(source))       # "resuming from checkpoint .../rolling_iter_000480 (iteration 480, ...)"
    source.checkpoint, source.parent_run_id, source.iteration    # or source.tune_experiment for Tune runs
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import pickletools

from absl import logging

from rl.harness.commands import transfer
from rl.harness.errors import UsageError
from rl.harness.run import buildinfo, records
from rl.harness.run.checkpoint_folders import science_name
from rl.harness.run.layout import RunLayout, outside_trees, recorded_folder
from rl.harness.run.manifest import CheckpointEntry, ResumeSource, RunManifest, TuneRunnerRecord, read_manifest
from rl.harness.run.status import COMPLETED, run_id_problem

_RLLIB_CHECKPOINT_FILE = "rllib_checkpoint.json"


def checkpoint_source(path: pathlib.Path, parent_run_id: str | None = None) -> ResumeSource:
    """A checkpoint folder (the harness's, with its counters, or a bare RLlib one); UsageError otherwise."""
    if not path.is_dir() or not os.access(path, os.R_OK | os.X_OK):
        raise UsageError(
            f"checkpoint {path} is not a readable folder; pass a checkpoint folder"
            " (artifacts/<run-id>/checkpoints/iter_N) or a run id"
        )
    if damaged := _damaged_file(path):
        raise UsageError(
            f"checkpoint {path} cannot be read: {damaged}; pass --resume-from an earlier checkpoint"
            " folder of that run (its checkpoints/iter_N), or fetch the checkpoint again from B2"
            " (docs/artifact_storage.md)"
        )
    state_file = path / records.CHECKPOINT_STATE_FILE
    if state_file.exists():
        try:
            state = records.read_json(str(state_file), "checkpoint state")
        except records.RecordError as error:
            raise records.RecordError(f"{error}; pass another checkpoint") from None
        iteration, env_steps = state.get("iteration"), state.get("env_steps")
        carried = () if iteration is None else (CheckpointEntry(str(path), iteration, env_steps),)
        return ResumeSource(
            checkpoint=path,
            parent_run_id=parent_run_id or state.get("run_id"),
            iteration=iteration,
            env_steps=env_steps,
            experiment=state.get("experiment"),
            carried_checkpoints=carried,
        )
    if (path / _RLLIB_CHECKPOINT_FILE).exists():
        return ResumeSource(checkpoint=path, parent_run_id=parent_run_id)
    raise UsageError(
        f"{path} is not a checkpoint (no {records.CHECKPOINT_STATE_FILE} or {_RLLIB_CHECKPOINT_FILE});"
        " pass a checkpoint folder (artifacts/<run-id>/checkpoints/iter_N) or a run id"
    )


def _damaged_file(folder: pathlib.Path) -> str | None:
    """The first file of a checkpoint folder that is not whole, named with why, or None.

    A pickle is walked opcode by opcode (`pickletools.genops`, which runs none of its code): one cut
    short (a copy or a disk that filled up) or garbled ends early. A JSON file must parse.
    """
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".pkl", ".json") or path.name == records.CHECKPOINT_STATE_FILE or not path.is_file():
            continue  # the state file is read next, with its own error
        try:
            with open(path, "rb") as handle:
                if path.suffix == ".json":
                    json.load(handle)
                else:
                    for _ in pickletools.genops(handle):
                        pass
        except (OSError, ValueError) as error:  # JSONDecodeError is a ValueError
            return f"{path.relative_to(folder)} is damaged ({error})"
    return None


def resolve_resume(value: str, results_root: pathlib.Path, artifacts_root: pathlib.Path) -> ResumeSource:
    """`--resume-from VALUE`: an existing path is a checkpoint, else a run id under `results_root`.

    A checkpoint outside both roots is named in one log line: it is code (pickles), loaded as this user.
    """
    path = pathlib.Path(value).expanduser()
    if path.exists():
        return _noted(checkpoint_source(path.resolve()), results_root, artifacts_root)
    if run_id_problem(value) is None:
        run_dir = RunLayout.find(results_root, value)
        if run_dir is None and (run_dir := transfer.fetch_records(value, results_root, artifacts_root)) is not None:
            logging.info(
                "run %s is not on this machine: fetched its records from the store into %s, verified", value, run_dir
            )
        if run_dir is not None:
            return _noted(_resume_from_run(value, run_dir, artifacts_root), results_root, artifacts_root)
    raise UsageError(
        f"--resume-from {value!r} is neither a checkpoint folder nor a run under {results_root};"
        f" pass a checkpoint path or the id of a run listed by `{buildinfo.harness_command('runs')}`"
    )


def _noted(source: ResumeSource, results_root: pathlib.Path, artifacts_root: pathlib.Path) -> ResumeSource:
    loaded = source.checkpoint or source.tune_experiment
    if outside_trees(loaded, (results_root, artifacts_root)):
        logging.warning(
            "resuming from %s, outside this run's results tree (%s, %s): a checkpoint is code (pickles);"
            " resume only from checkpoints you trust (docs/harness.md, Trust)",
            loaded,
            results_root,
            artifacts_root,
        )
    return source


def check_experiment(source: ResumeSource, requested: str, module_name: str) -> None:
    """UsageError unless the checkpoint of `--resume-from requested` was saved by recipe `module_name`.

    Another recipe's networks do not fit this one's (RLlib would fail deep in restoring, after the
    run's records exist). A bare RLlib checkpoint names no recipe: it is let through, with a warning.
    """
    if source.experiment is None:
        logging.warning(
            "--resume-from %s names no experiment (not saved by rl-harness): cannot check that it belongs to %s",
            requested,
            module_name,
        )
        return
    if source.experiment != module_name:
        raise UsageError(
            f"--resume-from {requested} is a checkpoint of {source.experiment}, not of {module_name}:"
            f" its networks would not fit this recipe; resume it with {source.experiment}'s own target,"
            f" or pass a run or checkpoint of {module_name}"
            f" (`{buildinfo.harness_command('runs', '--recipe', module_name)}` lists them)"
        )


def _resume_from_run(run_id: str, run_dir: pathlib.Path, artifacts_root: pathlib.Path) -> ResumeSource:
    manifest = read_manifest(str(run_dir))  # RecordError (a UsageError) names a damaged record
    layout = RunLayout.of_run(run_dir, manifest, artifacts_root)
    places = layout.artifact_places(manifest)
    if isinstance(manifest.runner, TuneRunnerRecord):
        for place in places:
            storage = recorded_folder(place, manifest.runner.storage, "Tune storage")
            if storage.is_dir():
                return _tune_source(run_id, manifest, storage)
        storage = recorded_folder(layout.artifacts_dir, manifest.runner.storage, "Tune storage")
        if transfer.fetch_artifacts(layout, manifest.runner.storage):
            logging.info(
                "the Tune storage of run %s is not on this machine: fetched it from the store into %s, verified",
                run_id,
                storage,
            )
            return _tune_source(run_id, manifest, storage)
        raise UsageError(
            f"the Tune storage of run {run_id} is not on this machine (looked in"
            f" {', '.join(map(str, places))}) and no store is configured; configure the store it was mirrored to,"
            f" or fetch artifacts/{layout.relative} (docs/artifact_storage.md)"
        )
    trials = sorted({c.trial_id for c in (*manifest.checkpoints, *manifest.rolling_checkpoints) if c.trial_id})
    if trials:
        raise UsageError(
            f"run {run_id} saved checkpoints for several trials ({', '.join(trials)}), so which one to"
            f" resume is ambiguous; pass --resume-from <checkpoint folder>"
            f" (artifacts/{layout.relative}/checkpoints/<trial>/iter_N)"
        )
    newest = manifest.resumable_checkpoint()
    if newest is None:
        raise UsageError(f"run {run_id} recorded no checkpoint to resume from; start a new run instead")
    for place in places:
        folder = recorded_folder(place, newest.path, "checkpoint")
        if folder.is_dir():
            source = checkpoint_source(folder, parent_run_id=run_id)
            return dataclasses.replace(
                source, **_lineage(manifest, place, newest), parent_completed=manifest.effective_status == COMPLETED
            )
    recorded_folder(layout.artifacts_dir, newest.path, "checkpoint")  # inside the run's folder, or RecordError
    fetched = transfer.fetch_newest_checkpoint(layout)
    if fetched is not None:
        source = checkpoint_source(fetched, parent_run_id=run_id)
        checkpoint = str(fetched.relative_to(layout.artifacts_dir))
        logging.info(
            "checkpoint %s of run %s is not on this machine: fetched it from the store into %s, verified%s",
            checkpoint,
            run_id,
            fetched,
            ""
            if checkpoint == newest.path
            else f" (the newest whole there; the run's manifest names {newest.path}, iteration {newest.iteration})",
        )
        reached = CheckpointEntry(checkpoint, source.iteration, source.env_steps)
        return dataclasses.replace(
            source,
            **_lineage(manifest, layout.artifacts_dir, reached),
            parent_completed=manifest.effective_status == COMPLETED,
        )
    raise UsageError(
        f"checkpoint {newest.path} of run {run_id} is not on this machine (looked in"
        f" {', '.join(map(str, places))}) and no store is configured; configure the store it was"
        f" mirrored to (docs/artifact_storage.md), or pass --resume-from <checkpoint folder>"
    )


def _tune_source(run_id: str, manifest: RunManifest, storage: pathlib.Path) -> ResumeSource:
    return ResumeSource(
        checkpoint=None, parent_run_id=run_id, tune_experiment=storage, experiment=manifest.experiment.module
    )


def _lineage(manifest: RunManifest, place: pathlib.Path, newest: CheckpointEntry) -> dict:
    """What a run resumed from `newest` (in artifacts folder `place`) carries: the science checkpoints up to it
    that are on this machine (`newest` too when it is one the manifest has not recorded yet), and the lineage's
    metrics files (the parent's carried rows, then its own)."""
    recorded = manifest.checkpoints_of(None)
    unrecorded = pathlib.PurePath(newest.path).name == science_name(newest.iteration or 0) and newest.path not in {
        e.path for e in recorded
    }
    checkpoints = []
    for entry in (*recorded, *((newest,) if unrecorded else ())):
        folder = recorded_folder(place, entry.path, "checkpoint")
        if (entry.iteration or 0) <= (newest.iteration or 0) and folder.is_dir():
            checkpoints.append(dataclasses.replace(entry, path=str(folder)))
    metrics = tuple(
        place / name for name in (records.LINEAGE_METRICS_FILE, records.METRICS_FILE) if (place / name).is_file()
    )
    return {"carried_checkpoints": tuple(checkpoints), "carried_metrics": metrics}


def describe(source: ResumeSource) -> str:
    """What a resume starts from, as one line for the log."""
    if source.tune_experiment is not None:
        return f"resuming run {source.parent_run_id}'s Tune experiment {source.tune_experiment}"
    counters = ", ".join(
        f"{name} {value}"
        for name, value in (("iteration", source.iteration), ("env steps", source.env_steps))
        if value is not None
    )
    return f"resuming from checkpoint {source.checkpoint}{f' ({counters})' if counters else ''}"
