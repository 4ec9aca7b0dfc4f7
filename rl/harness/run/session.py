"""One run's record keeper: manifest with heartbeat, metrics stream, summary, checkpoints, signals.

The CLI creates a RunSession and hands it to the recipe as `context.recorder`:

    session = RunSession(layout=layout, manifest=begin.new_manifest(...), seeds=seeds)   # a RunLayout, a RunManifest
    session.start()                      # folders, manifest "running", heartbeat thread, SIGINT/SIGTERM
    session.log_metrics({"training_iteration": 1, "env_runners/episode_return_mean": 21.0})   # + TensorBoard events
    with session.checkpoint(iteration=1, env_steps=500) as folder:
        algo.save_to_path(folder)        # renamed to checkpoints/iter_000001 when the block succeeds
    if session.rolling_due(progress=0.4):    # minutes or budget share since the last save (RollingCadence)
        with session.rolling_checkpoint(iteration=2, env_steps=1000) as folder:
            algo.save_to_path(folder)    # the line's one rolling checkpoint; the previous one goes after
    if session.stop_requested: ...       # a signal arrived or the budget cap was reached: checkpoint and return
    session.finish("completed")

Its jobs live in their own modules, each behind this one face: the stop signals
(`stop_signals.StopSignals`), the metrics stream (`metrics_stream.MetricsStream`: metrics.jsonl,
TensorBoard, the summary's curves), the checkpoint folders (`checkpoint_folders.CheckpointFolders`)
and the record keeper (`record_keeper.RecordKeeper`: the manifest and its heartbeat).

Record rules (rl/harness/AGENTS.md): every JSON record is replaced atomically; metrics rows
are appended one write at a time; nothing is ever truncated or deleted, except a rolling
checkpoint once a newer checkpoint of its line is complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import pathlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from absl import logging

from rl.harness import env_vars
from rl.harness.run import records, redaction, seeding, tensorboard_events
from rl.harness.run.checkpoint_folders import CheckpointFolders, science_name
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import OutputEntry, ResumeSource, RunError, RunManifest, RunnerRecord
from rl.harness.run.metric_keys import ITERATION
from rl.harness.run.metrics_stream import MetricsStream
from rl.harness.run.record_keeper import RecordKeeper
from rl.harness.run.rolling import RollingCadence, RollingClock
from rl.harness.run.rows import RowBudget
from rl.harness.run.status import RUNNING, Heartbeat, this_process, utc_now
from rl.harness.run.stop_signals import StopSignals

# A heartbeat older than this many intervals means the writer is gone.
STALE_AFTER_INTERVALS = 6

# A run's own record files, which no output may replace.
_RECORD_FILES = frozenset({records.MANIFEST_FILE, records.SUMMARY_FILE, records.METRICS_FILE, records.PATCH_FILE})


class RunSession:
    """Keeps one run's records while it runs; the recipe sees it as `context.recorder`.

    It owns the manifest (a frozen `RunManifest`, replaced field by field and rewritten atomically
    on every change and heartbeat), the metrics stream and the summary's curves, the checkpoint
    folders, and SIGINT/SIGTERM (which become `stop_requested`). Thread-safe: Tune's callbacks
    and the heartbeat thread write through the same lock.

        session.record_runner(DirectRunnerRecord(...))      # the manifest's runner section (typed)
        session.manifest.checkpoints[-1].path         # what was saved so far
    """

    def __init__(
        self,
        *,
        layout: RunLayout,
        manifest: RunManifest,
        seeds: seeding.SeedStreams,
        heartbeat_s: float = env_vars.DEFAULT_HEARTBEAT_S,
        verbosity: int | None = None,
        budget_cap: RowBudget = RowBudget(),
        rolling: RollingCadence = RollingCadence(),
    ):
        self.layout = layout
        self.run_id = layout.run_id
        self.results_dir = layout.results_dir
        self.artifacts_dir = layout.artifacts_dir
        self.checkpoints_dir = layout.checkpoints_dir
        self._heartbeat_s = heartbeat_s
        self._lock = threading.RLock()
        self._keeper = RecordKeeper(self.results_dir, manifest, seeds=seeds, lock=self._lock)
        self._stream = MetricsStream(results_dir=self.results_dir, artifacts_dir=self.artifacts_dir, run_id=self.run_id)
        self._folders = CheckpointFolders(
            self.checkpoints_dir,
            artifacts_dir=self.artifacts_dir,
            run_id=self.run_id,
            experiment=manifest.experiment.module,
        )
        self._signals = StopSignals(verbosity=logging.get_verbosity() if verbosity is None else verbosity)
        self._budget_cap = budget_cap
        self._rolling = RollingClock(rolling)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.layout.claim()
        self.checkpoints_dir.mkdir()
        manifest = self._keeper.manifest
        events_folder = tensorboard_events.lineage_folder(self.layout, manifest.parent_run)
        self._stream.open(events_folder)
        now = utc_now()
        self._keeper.set(
            run_id=self.run_id,
            status=RUNNING,
            started_at=now,
            ended_at=None,
            heartbeat=Heartbeat(
                at=now, interval_s=self._heartbeat_s, stale_after_s=round(STALE_AFTER_INTERVALS * self._heartbeat_s, 3)
            ),
            process=this_process(),
            paths={**manifest.paths, tensorboard_events.MANIFEST_PATH_KEY: str(events_folder)},
            checkpoints=(),
            error=None,
            # --stop-at-iteration / --stop-at-env-steps (reproduce's prefix): the run stops early on purpose.
            budget_cap=dataclasses.asdict(self._budget_cap) if self._budget_cap.key else None,
        )
        self._keeper.write()
        self.reclaim()
        self._cut_redone_events(events_folder)  # after reclaim: its log line needs absl's handler
        self._keeper.start_heartbeat(self._heartbeat_s, also=self._stream.write_summary)

    def carry(self, source: ResumeSource) -> None:
        """Takes over what a resumed run continues: the parent's science checkpoints up to the one it starts from
        (linked into checkpoints/ and recorded as this run's, so its stages after training read them as a fresh
        run's) and its lineage's metrics rows up to that checkpoint (LINEAGE_METRICS_FILE, `RunContext.metrics`)."""
        carried = tuple(self._folders.carry(entry) for entry in source.carried_checkpoints)
        rows = [
            row
            for path in source.carried_metrics
            for row in records.read_json_lines(str(path))
            if source.iteration is None or (row.get(ITERATION) or 0) <= source.iteration
        ]
        if rows:
            records.write_json_lines_atomically(str(self.artifacts_dir / records.LINEAGE_METRICS_FILE), rows)
        if carried:
            self.update_manifest(checkpoints=carried)
            logging.info(
                "carried %d checkpoint(s) of run %s (iterations %s) and %d metrics row(s)",
                len(carried),
                source.parent_run_id,
                ", ".join(str(entry.iteration) for entry in carried),
                len(rows),
            )

    def _cut_redone_events(self, events_folder: pathlib.Path) -> None:
        """A resumed run's lineage keeps no events past the checkpoint it starts from (it logs those rows again)."""
        parent = self._keeper.manifest.parent_run or {}
        step = next((parent[key] for key in ("env_steps", "iteration") if parent.get(key) is not None), None)
        if step is None or events_folder == self.layout.artifacts_dir / tensorboard_events.EVENTS_DIR:
            return
        try:
            removed = tensorboard_events.cut_after(events_folder, int(step))
        except Exception as error:  # noqa: BLE001 - a view must never stop a run
            logging.warning(
                "TensorBoard: could not cut the events past step %s in %s (%s: %s); the curves may"
                " show the redone steps twice",
                step,
                events_folder,
                type(error).__name__,
                error,
            )
            return
        if removed:
            logging.info(
                "TensorBoard: %d event(s) past step %s (redone from the checkpoint) cut from %s",
                removed,
                step,
                events_folder,
            )

    def finish(self, status: str, *, error: BaseException | None = None, exit_code: int = 0) -> None:
        self._keeper.stop_heartbeat()
        self._signals.restore()
        with self._lock:
            ended_at = utc_now()
            self._keeper.set(
                status=status,
                ended_at=ended_at,
                exit_code=exit_code,
                interrupted_by=self._signals.stop_signal,
                error=None if error is None else RunError(type=type(error).__name__, message=redaction.redact(error)),
                heartbeat=dataclasses.replace(self._keeper.manifest.heartbeat, at=ended_at),
            )
            self._stream.close()
            self._stream.write_summary()
            self._keeper.write()

    def write_results_file(self, name: str, data: bytes) -> None:
        """Saves a record beside the manifest (e.g. the uncommitted change's patch)."""
        records.write_bytes_atomically(str(self.results_dir / name), data)

    def update_manifest(self, **fields: Any) -> None:
        """Replaces manifest fields (`RunManifest`'s: remote, exit_code, reproduction, ...) and rewrites it."""
        with self._lock:
            self._keeper.set(**fields)
            self._keeper.write()

    def record_runner(self, runner: RunnerRecord) -> None:
        """The manifest's runner section: how this run trains (one of the typed runner records)."""
        self.update_manifest(runner=runner)

    def record_cluster(self, facts: Mapping[str, Any]) -> None:
        """The Ray cluster the run trains on (`cluster.describe`), or more facts about it (merged)."""
        with self._lock:
            self.update_manifest(cluster={**(self._keeper.manifest.cluster or {}), **facts})

    @property
    def manifest(self) -> RunManifest:
        return self._keeper.manifest

    # -- metrics and summary ----------------------------------------------------------------

    def log_metrics(self, row: dict, *, trial: str | None = None) -> dict:
        """Appends one result row to metrics.jsonl; returns it flattened (nested dicts -> `a/b` keys).

        `trial` (a Tune trial id) keeps each trial's curves apart in the summary.
        """
        with self._lock:
            flat = self._stream.append(row, trial=trial)
            if self._budget_cap.reached(flat) and not self._signals.requested:
                logging.info(
                    "budget cap %s >= %d reached: finishing this iteration",
                    self._budget_cap.key,
                    self._budget_cap.bound,
                )
                self._signals.request()
        return flat

    def summarize(self, *keys: str) -> None:
        """Adds metric keys to the compact curves in results/<run-id>/summary.json."""
        with self._lock:
            self._stream.summarize(*keys)

    def set_summary_section(self, name: str, value: Any) -> None:
        """Adds a named section to summary.json (the Tune runner's per-trial table)."""
        with self._lock:
            self._stream.set_section(name, value)
            self._stream.write_summary()

    # -- outputs ---------------------------------------------------------------------------------

    def write_output(self, name: str, data: Any, *, place: str | None = None) -> pathlib.Path:
        """Writes `data` as this run's output `name` (atomically) and lists it in the manifest's `outputs`.

        `name` is a path inside the run's folder (`probe_report.json`, `figures/simplex.png`);
        `place` is "results" (small, committed) or "artifacts" (large, git-ignored), by default
        `records.output_place(name)`: figures with the artifacts, the rest with the results. `data` is
        bytes, text, or anything JSON holds (written as JSON). Writing a name again replaces it.
        """
        place = place or records.output_place(name)
        folder = {records.RESULTS: self.results_dir, records.ARTIFACTS: self.artifacts_dir}.get(place)
        if folder is None:
            raise ValueError(f"output place {place!r} is neither 'results' nor 'artifacts'")
        relative = pathlib.PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts or name in _RECORD_FILES:
            raise ValueError(
                f"output name {name!r} must be a relative path inside the run's folder, not '..' and"
                f" not one of the run's own records ({', '.join(sorted(_RECORD_FILES))})"
            )
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        records.write_data_atomically(str(path), data)
        content = path.read_bytes()
        entry = OutputEntry(
            name=str(relative),
            place=place,
            path=str(relative),
            bytes=len(content),
            sha256=hashlib.sha256(content).hexdigest(),
            written_at=utc_now(),
        )
        with self._lock:
            outputs = self._keeper.manifest.outputs
            self._keeper.set(outputs=(*(o for o in outputs if (o.place, o.name) != (place, entry.name)), entry))
            self._keeper.write()
        return path

    # -- checkpoints -------------------------------------------------------------------------

    @contextlib.contextmanager
    def checkpoint(
        self, *, iteration: int, env_steps: int | None, trial: str | None = None, **extra: Any
    ) -> Iterator[pathlib.Path]:
        """Yields an empty folder to save into; on success it becomes checkpoints/iter_<N>.

        `trial` keeps one run's separate lines of checkpoints apart (several agents trained in one
        run): checkpoints/<trial>/iter_<N>, recorded with `trial_id` as Tune trials are. A rolling
        checkpoint of the line that this one reaches is removed (it is no newer).
        """
        with self._folders.saving(trial) as partial:
            yield partial
        saved = self._place(
            partial, science_name(iteration), iteration=iteration, env_steps=env_steps, trial=trial, extra=extra
        )
        with self._lock:
            manifest = self._keeper.manifest
            stale = [c for c in manifest.rolling_checkpoints if c.trial_id == trial and (c.iteration or 0) <= iteration]
            self._keeper.set(
                checkpoints=(*(c for c in manifest.checkpoints if c.path != saved.path), saved),
                rolling_checkpoints=tuple(c for c in manifest.rolling_checkpoints if c not in stale),
            )
            self._keeper.write()
        self._folders.remove(stale)
        logging.info("checkpoint %s (iteration %d)", self.artifacts_dir / saved.path, iteration)

    @contextlib.contextmanager
    def rolling_checkpoint(
        self, *, iteration: int, env_steps: int | None, trial: str | None = None
    ) -> Iterator[pathlib.Path]:
        """Yields an empty folder to save the latest state into; on success it becomes the line's one rolling
        checkpoint (checkpoints/[<trial>/]rolling_iter_<N>), and the previous one is removed only then.

        Rolling checkpoints are for resuming (`RunManifest.resumable_checkpoint`); probes and the
        science schedule never see them.
        """
        with self._folders.saving(trial) as partial:
            yield partial
        saved = self._place(
            partial,
            f"rolling_iter_{iteration:06d}",
            iteration=iteration,
            env_steps=env_steps,
            trial=trial,
            extra={"rolling": True},
        )
        with self._lock:
            rolling = self._keeper.manifest.rolling_checkpoints
            previous = [c for c in rolling if c.trial_id == trial and c.path != saved.path]
            self._keeper.set(rolling_checkpoints=(*(c for c in rolling if c.trial_id != trial), saved))
            self._keeper.write()
        self._folders.remove(previous)
        logging.info("rolling checkpoint %s (iteration %d)", self.artifacts_dir / saved.path, iteration)

    def _place(self, partial: pathlib.Path, name: str, **entry: Any):
        saved = self._folders.place(partial, name, **entry)
        with self._lock:
            self._stream.sync()  # the rows this checkpoint reflects reach the disk with it
        return saved

    def rolling_restart(self, progress: float, *, trial: str | None = None, save_s: float | None = None) -> None:
        """Training of a line (re)starts, or it just saved (in `save_s`): the rolling cadence counts from here."""
        self._rolling.restart(trial, progress, save_s)

    def rolling_due(self, progress: float, *, trial: str | None = None) -> bool:
        """Whether the line's rolling checkpoint should be refreshed now (`RollingCadence`)."""
        return self._rolling.due(trial, progress)

    def record_checkpoint(
        self, path: str, *, iteration: int | None, env_steps: int | None, trial_id: str | None = None
    ) -> None:
        """Records a checkpoint saved by someone else (Tune) without moving it."""
        entry = self._folders.entry_of(path, iteration=iteration, env_steps=env_steps, trial_id=trial_id)
        with self._lock:
            self._keeper.set(checkpoints=(*self._keeper.manifest.checkpoints, entry))
            self._keeper.write()

    # -- signals -----------------------------------------------------------------------------

    @property
    def stop_requested(self) -> bool:
        """True once SIGINT or SIGTERM arrived or a row reached the budget cap: save a final checkpoint and return.

        `stop_signal` tells the two apart (None for the cap: the run then completed).
        """
        return self._signals.requested

    @property
    def stop_signal(self) -> str | None:
        return self._signals.stop_signal

    @property
    def budget_cap(self) -> RowBudget:
        """The --stop-at-* cap (a RowBudget that never reaches without one): the Tune runner checks results against it."""
        return self._budget_cap

    def reclaim(self) -> None:
        """(Re)installs the SIGINT/SIGTERM handlers and absl logging (`StopSignals.reclaim`).

        Runners call it after `ray.init`, which takes SIGTERM; importing RLlib raises the root
        logger's level to ERROR, which would silence the progress lines.
        """
        self._signals.reclaim()

    def signals_stop_at_once(self) -> contextlib.AbstractContextManager:
        """For work after `finish` that cannot poll `stop_requested` (the upload): SIGINT/SIGTERM raise
        KeyboardInterrupt there and then, and become the run's `stop_signal`."""
        return self._signals.stop_at_once()
