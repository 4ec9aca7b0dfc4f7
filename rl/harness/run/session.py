"""One run's record keeper: manifest with heartbeat, metrics stream, summary, checkpoints, signals.

The CLI creates a RunSession and hands it to the recipe as `context.recorder`:

    session = RunSession(layout=layout, manifest=manifest.begin(...), seeds=seeds)   # a RunLayout, a RunManifest
    session.start()                      # folders, manifest "running", heartbeat thread, SIGINT/SIGTERM
    session.log_metrics({"training_iteration": 1, "env_runners/episode_return_mean": 21.0})   # + TensorBoard events
    with session.checkpoint(iteration=1, env_steps=500) as folder:
        algo.save_to_path(folder)        # renamed to checkpoints/iter_000001 when the block succeeds
    if session.rolling_due(progress=0.4):    # minutes or budget share since the last save (RollingCadence)
        with session.rolling_checkpoint(iteration=2, env_steps=1000) as folder:
            algo.save_to_path(folder)    # the line's one rolling checkpoint; the previous one goes after
    if session.stop_requested: ...       # a signal arrived or the budget cap was reached: checkpoint and return
    session.finish("completed")

Record rules (rl/harness/AGENTS.md): every JSON record is replaced atomically; metrics rows
are appended one write at a time; nothing is ever truncated or deleted, except a rolling
checkpoint once a newer checkpoint of its line is complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import pathlib
import re
import shutil
import signal
import tempfile
import threading
from typing import Any, Iterator, Mapping, Optional

from absl import logging

from rl.harness import settings
from rl.harness.run import metric_keys, records, redaction, seeding, tensorboard_events
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import CheckpointEntry, OutputEntry, RunError, RunManifest, RunnerRecord
from rl.harness.run.rolling import RollingCadence, RollingClock
from rl.harness.run.rows import RowBudget, downsample, flatten_scalars
from rl.harness.run.status import RUNNING, Heartbeat, this_process, utc_now

# A heartbeat older than this many intervals means the writer is gone.
STALE_AFTER_INTERVALS = 6
CURVE_POINTS = 100
# summary.json and harness_checkpoint.json keep their own shapes (unchanged by the manifest's schema 2).
SUMMARY_SCHEMA_VERSION = 1
CHECKPOINT_STATE_SCHEMA_VERSION = 1
# Curves every summary carries when present (RLlib's names); recipes add theirs via summarize().
DEFAULT_SUMMARY_KEYS = (metric_keys.RETURN, metric_keys.EPISODE_LENGTH, metric_keys.ENV_STEPS,
                        metric_keys.ITERATION_SECONDS)
X_KEY = metric_keys.ITERATION
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


# A run's own record files, which no output may replace.
_RECORD_FILES = frozenset({records.MANIFEST_FILE, records.SUMMARY_FILE, records.METRICS_FILE, records.PATCH_FILE})
_TRIAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _cancel_failure_alarm() -> None:
    """Cancels the abort that a C++ failure-signal handler which saw this signal first has scheduled.

    ray.init installs absl's failure handler for SIGTERM, among others, before `reclaim` takes
    SIGTERM back: a SIGTERM in that window went through it, and it arms alarm(3) with an
    immediate-abort SIGALRM handler, so the run died (SIGABRT) 3 s into its graceful stop. The
    harness uses no alarm of its own; SIGALRM gets back the handler Python knows (the default).
    """
    signal.alarm(0)
    known = signal.getsignal(signal.SIGALRM)  # None: set outside Python, so not the harness's
    signal.signal(signal.SIGALRM, signal.SIG_DFL if known is None else known)


def curve_summary(curves: Mapping[str, list]) -> dict:
    """summary.json's `metrics`: per key its last, min and max and a downsampled curve of [x, y] points."""
    summary = {}
    for key, points in sorted(curves.items()):
        finite = [y for _, y in points if y is not None and math.isfinite(y)]
        summary[key] = {
            "last": points[-1][1],
            "min": min(finite) if finite else None,
            "max": max(finite) if finite else None,
            "points": len(points),
            "curve": downsample(points, CURVE_POINTS),
        }
    return summary


def curves_of_rows(rows: list[dict], keys) -> dict[str, list]:
    """The [x, y] points of each of `keys` in metrics rows, as the session collects them while it runs."""
    curves: dict[str, list] = {}
    for number, row in enumerate(rows, start=1):
        x = row.get(X_KEY, number)
        for key in keys:
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                curves.setdefault(key, []).append([x, value])
    return curves


@contextlib.contextmanager
def _removed_on_error(folder: pathlib.Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


class RunSession:
    """Keeps one run's records while it runs; the recipe sees it as `context.recorder`.

    It owns the manifest (a frozen `RunManifest`, replaced field by field and rewritten atomically
    on every change and heartbeat), the metrics stream and the summary's curves, the checkpoint
    folders, and SIGINT/SIGTERM (which become `stop_requested`). Thread-safe: Tune's callbacks
    and the heartbeat thread write through the same lock.

        session.record_runner(DirectRunner(...))      # the manifest's runner section (typed)
        session.manifest.checkpoints[-1].path         # what was saved so far
    """

    def __init__(
        self,
        *,
        layout: RunLayout,
        manifest: RunManifest,
        seeds: seeding.SeedStreams,
        heartbeat_s: float = settings.DEFAULT_HEARTBEAT_S,
        verbosity: Optional[int] = None,
        budget_cap: RowBudget = RowBudget(),
        rolling: RollingCadence = RollingCadence(),
    ):
        self.layout = layout
        self.run_id = layout.run_id
        self.results_dir = layout.results_dir
        self.artifacts_dir = layout.artifacts_dir
        self.checkpoints_dir = layout.checkpoints_dir
        self._seeds = seeds
        self._heartbeat_s = heartbeat_s
        self._verbosity = logging.get_verbosity() if verbosity is None else verbosity
        self._lock = threading.RLock()
        self._manifest = manifest
        self._summary_keys = set(DEFAULT_SUMMARY_KEYS)
        self._curves: dict[str, dict[str, list]] = {}  # group ("" or a Tune trial id) -> key -> [[x, y]]
        self._rows = 0
        self._summary_sections: dict[str, Any] = {}
        self._stop = threading.Event()
        self._stop_signal: Optional[str] = None
        self._budget_cap = budget_cap
        self._rolling = RollingClock(rolling)
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: Optional[threading.Thread] = None
        self._previous_handlers: dict[int, Any] = {}
        self._stop_at_once = False
        self._metrics: Optional[records.JsonLinesWriter] = None
        self._events: Optional[tensorboard_events.ScalarEvents] = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.layout.claim()
        self.checkpoints_dir.mkdir()
        self._metrics = records.JsonLinesWriter(str(self.artifacts_dir / records.METRICS_FILE))
        events_folder = tensorboard_events.lineage_folder(self.layout, self._manifest.parent_run)
        self._events = tensorboard_events.ScalarEvents(events_folder, self.run_id, headline=self._summary_keys)
        now = utc_now()
        self._manifest = dataclasses.replace(
            self._manifest,
            run_id=self.run_id,
            status=RUNNING,
            started_at=now,
            ended_at=None,
            heartbeat=Heartbeat(at=now, interval_s=self._heartbeat_s,
                                stale_after_s=round(STALE_AFTER_INTERVALS * self._heartbeat_s, 3)),
            process=this_process(),
            paths={**self._manifest.paths, tensorboard_events.MANIFEST_PATH_KEY: str(events_folder)},
            checkpoints=(),
            error=None,
            # --stop-at-iteration / --stop-at-env-steps (reproduce's prefix): the run stops early on purpose.
            budget_cap=dataclasses.asdict(self._budget_cap) if self._budget_cap.key else None,
        )
        self._write_manifest()
        self.reclaim()
        self._cut_redone_events(events_folder)  # after reclaim: its log line needs absl's handler
        self._heartbeat_thread = threading.Thread(target=self._beat, name="rl-harness-heartbeat", daemon=True)
        self._heartbeat_thread.start()

    def _cut_redone_events(self, events_folder: pathlib.Path) -> None:
        """A resumed run's lineage keeps no events past the checkpoint it starts from (it logs those rows again)."""
        parent = self._manifest.parent_run or {}
        step = next((parent[key] for key in ("env_steps", "iteration") if parent.get(key) is not None), None)
        if step is None or events_folder == self.layout.artifacts_dir / tensorboard_events.EVENTS_DIR:
            return
        try:
            removed = tensorboard_events.cut_after(events_folder, int(step))
        except Exception as error:  # noqa: BLE001 - a view must never stop a run
            logging.warning("TensorBoard: could not cut the events past step %s in %s (%s: %s); the curves may"
                            " show the redone steps twice", step, events_folder, type(error).__name__, error)
            return
        if removed:
            logging.info("TensorBoard: %d event(s) past step %s (redone from the checkpoint) cut from %s", removed,
                         step, events_folder)

    def finish(self, status: str, *, error: Optional[BaseException] = None, exit_code: int = 0) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join()
        self._restore_signals()
        with self._lock:
            ended_at = utc_now()
            self._manifest = dataclasses.replace(
                self._manifest,
                status=status,
                ended_at=ended_at,
                exit_code=exit_code,
                interrupted_by=self._stop_signal,
                error=None if error is None else RunError(type=type(error).__name__, message=redaction.redact(error)),
                heartbeat=dataclasses.replace(self._manifest.heartbeat, at=ended_at),
            )
            if self._metrics is not None:
                self._metrics.close()
                self._events.close()
            self._write_summary()
            self._write_manifest()

    def write_results_file(self, name: str, data: bytes) -> None:
        """Saves a record beside the manifest (e.g. the uncommitted change's patch)."""
        records.write_bytes_atomically(str(self.results_dir / name), data)

    def update_manifest(self, **fields: Any) -> None:
        """Replaces manifest fields (`RunManifest`'s: remote, exit_code, reproduction, ...) and rewrites it."""
        with self._lock:
            self._manifest = dataclasses.replace(self._manifest, **fields)
            self._write_manifest()

    def record_runner(self, runner: RunnerRecord) -> None:
        """The manifest's runner section: how this run trains (one of the typed runner records)."""
        self.update_manifest(runner=runner)

    def record_cluster(self, facts: Mapping[str, Any]) -> None:
        """The Ray cluster the run trains on (`cluster.describe`), or more facts about it (merged)."""
        with self._lock:
            self.update_manifest(cluster={**(self._manifest.cluster or {}), **facts})

    @property
    def manifest(self) -> RunManifest:
        with self._lock:
            return self._manifest

    # -- metrics and summary ----------------------------------------------------------------

    def log_metrics(self, row: dict, *, trial: Optional[str] = None) -> dict:
        """Appends one result row to metrics.jsonl; returns it flattened (nested dicts -> `a/b` keys).

        `trial` (a Tune trial id) keeps each trial's curves apart in the summary.
        """
        flat = flatten_scalars(row)
        with self._lock:
            self._rows += 1
            flat.setdefault("harness/row", self._rows)
            flat.setdefault("harness/logged_at", utc_now())
            self._metrics.append(flat)
            self._events.write(flat, trial=trial)  # after the record: a failed view costs no row
            if self._budget_cap.reached(flat) and not self._stop.is_set():
                logging.info("budget cap %s >= %d reached: finishing this iteration", self._budget_cap.key,
                             self._budget_cap.bound)
                self._stop.set()
            group = self._curves.setdefault(trial or "", {})
            x = flat.get(X_KEY, self._rows)
            for key in self._summary_keys:
                value = flat.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    group.setdefault(key, []).append([x, value])
        return flat

    def summarize(self, *keys: str) -> None:
        """Adds metric keys to the compact curves in results/<run-id>/summary.json."""
        with self._lock:
            self._summary_keys.update(keys)

    def set_summary_section(self, name: str, value: Any) -> None:
        """Adds a named section to summary.json (the Tune runner's per-trial table)."""
        with self._lock:
            self._summary_sections[name] = value
            self._write_summary()

    def _write_summary(self) -> None:
        summary = {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "run_id": self.run_id,
            "rows": self._rows,
            "x": X_KEY,
            "metrics": curve_summary(self._curves.get("", {})),
            **self._summary_sections,
        }
        per_trial = {group: curve_summary(curves) for group, curves in self._curves.items() if group}
        if per_trial:
            summary["trial_metrics"] = per_trial
        records.write_json_atomically(str(self.results_dir / records.SUMMARY_FILE), summary)

    # -- outputs ---------------------------------------------------------------------------------

    def write_output(self, name: str, data: Any, *, place: str = "results") -> pathlib.Path:
        """Writes `data` as this run's output `name` (atomically) and lists it in the manifest's `outputs`.

        `name` is a path inside the run's folder (`probe_report.json`, `figures/simplex.png`);
        `place` is "results" (small, committed) or "artifacts" (large, git-ignored). `data` is
        bytes, text, or anything JSON holds (written as JSON). Writing a name again replaces it.
        """
        folder = {"results": self.results_dir, "artifacts": self.artifacts_dir}.get(place)
        if folder is None:
            raise ValueError(f"output place {place!r} is neither 'results' nor 'artifacts'")
        relative = pathlib.PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts or name in _RECORD_FILES:
            raise ValueError(f"output name {name!r} must be a relative path inside the run's folder, not '..' and"
                             f" not one of the run's own records ({', '.join(sorted(_RECORD_FILES))})")
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        records.write_data_atomically(str(path), data)
        content = path.read_bytes()
        entry = OutputEntry(name=str(relative), place=place, path=str(relative), bytes=len(content),
                            sha256=hashlib.sha256(content).hexdigest(), written_at=utc_now())
        with self._lock:
            self._manifest = dataclasses.replace(self._manifest, outputs=(
                *(o for o in self._manifest.outputs if (o.place, o.name) != (place, entry.name)), entry))
            self._write_manifest()
        return path

    # -- checkpoints -------------------------------------------------------------------------

    @contextlib.contextmanager
    def checkpoint(self, *, iteration: int, env_steps: Optional[int], trial: Optional[str] = None,
                   **extra: Any) -> Iterator[pathlib.Path]:
        """Yields an empty folder to save into; on success it becomes checkpoints/iter_<N>.

        `trial` keeps one run's separate lines of checkpoints apart (several agents trained in one
        run): checkpoints/<trial>/iter_<N>, recorded with `trial_id` as Tune trials are. A rolling
        checkpoint of the line that this one reaches is removed (it is no newer).
        """
        partial = self._partial_folder(trial)
        with _removed_on_error(partial):
            yield partial
        saved = self._place(partial, f"iter_{iteration:06d}", iteration=iteration, env_steps=env_steps, trial=trial,
                            extra=extra)
        with self._lock:
            self._manifest = dataclasses.replace(self._manifest, checkpoints=(
                *(c for c in self._manifest.checkpoints if c.path != saved.path), saved))
            stale = [c for c in self._manifest.rolling_checkpoints
                     if c.trial_id == trial and (c.iteration or 0) <= iteration]
            self._manifest = dataclasses.replace(self._manifest, rolling_checkpoints=tuple(
                c for c in self._manifest.rolling_checkpoints if c not in stale))
            self._write_summary()
            self._write_manifest()
        self._remove_checkpoints(stale)
        logging.info("checkpoint %s (iteration %d)", self.artifacts_dir / saved.path, iteration)

    @contextlib.contextmanager
    def rolling_checkpoint(self, *, iteration: int, env_steps: Optional[int],
                           trial: Optional[str] = None) -> Iterator[pathlib.Path]:
        """Yields an empty folder to save the latest state into; on success it becomes the line's one rolling
        checkpoint (checkpoints/[<trial>/]rolling_iter_<N>), and the previous one is removed only then.

        Rolling checkpoints are for resuming (`RunManifest.resumable_checkpoint`); probes and the
        science schedule never see them.
        """
        partial = self._partial_folder(trial)
        with _removed_on_error(partial):
            yield partial
        saved = self._place(partial, f"rolling_iter_{iteration:06d}", iteration=iteration, env_steps=env_steps,
                            trial=trial, extra={"rolling": True})
        with self._lock:
            previous = [c for c in self._manifest.rolling_checkpoints if c.trial_id == trial and c.path != saved.path]
            self._manifest = dataclasses.replace(self._manifest, rolling_checkpoints=(
                *(c for c in self._manifest.rolling_checkpoints if c.trial_id != trial), saved))
            self._write_summary()
            self._write_manifest()
        self._remove_checkpoints(previous)
        logging.info("rolling checkpoint %s (iteration %d)", self.artifacts_dir / saved.path, iteration)

    @property
    def rolling_cadence(self) -> RollingCadence:
        return self._rolling.cadence

    def rolling_restart(self, progress: float, *, trial: Optional[str] = None, save_s: float = 0.0) -> None:
        """Training of a line (re)starts, or it just saved (in `save_s`): the rolling cadence counts from here."""
        self._rolling.restart(trial, progress, save_s)

    def rolling_due(self, progress: float, *, trial: Optional[str] = None) -> bool:
        """Whether the line's rolling checkpoint should be refreshed now (`RollingCadence`)."""
        return self._rolling.due(trial, progress)

    def _partial_folder(self, trial: Optional[str]) -> pathlib.Path:
        if trial is not None and not _TRIAL_NAME.match(trial):
            raise ValueError(f"checkpoint trial {trial!r} must be a plain folder name (letters, digits, '_', '.', '-'),"
                             " e.g. the agent's name")
        return pathlib.Path(tempfile.mkdtemp(dir=self.checkpoints_dir, prefix=".partial-"))

    def _place(self, partial: pathlib.Path, name: str, *, iteration: int, env_steps: Optional[int],
               trial: Optional[str], extra: Mapping[str, Any]) -> CheckpointEntry:
        """Completes a saved folder (its state file, then one rename to checkpoints/[<trial>/]<name>)."""
        state = {"schema_version": CHECKPOINT_STATE_SCHEMA_VERSION, "run_id": self.run_id,
                 "experiment": self._manifest.experiment.module, "iteration": iteration, "env_steps": env_steps,
                 "saved_at": utc_now(), **({"trial_id": trial} if trial is not None else {}), **extra}
        records.write_json_atomically(str(partial / records.CHECKPOINT_STATE_FILE), state)
        final = (self.checkpoints_dir / trial if trial is not None else self.checkpoints_dir) / name
        final.parent.mkdir(exist_ok=True)
        if final.exists():  # the same iteration saved again (e.g. on interrupt): keep the newest
            shutil.rmtree(final)
        os.rename(partial, final)
        with self._lock:
            self._metrics.sync()
        return CheckpointEntry(path=str(final.relative_to(self.artifacts_dir)), iteration=iteration,
                               env_steps=env_steps, saved_at=state["saved_at"], trial_id=trial)

    def _remove_checkpoints(self, entries) -> None:
        for entry in entries:
            shutil.rmtree(self.artifacts_dir / entry.path, ignore_errors=True)

    def record_checkpoint(self, path: str, *, iteration: Optional[int], env_steps: Optional[int],
                          trial_id: Optional[str] = None) -> None:
        """Records a checkpoint saved by someone else (Tune) without moving it."""
        entry = CheckpointEntry(path=os.path.relpath(path, self.artifacts_dir), iteration=iteration,
                                env_steps=env_steps, saved_at=utc_now(), trial_id=trial_id)
        with self._lock:
            self._manifest = dataclasses.replace(self._manifest, checkpoints=(*self._manifest.checkpoints, entry))
            self._write_manifest()

    # -- signals -----------------------------------------------------------------------------

    @property
    def stop_requested(self) -> bool:
        """True once SIGINT or SIGTERM arrived or a row reached the budget cap: save a final checkpoint and return.

        `stop_signal` tells the two apart (None for the cap: the run then completed).
        """
        return self._stop.is_set()

    @property
    def stop_signal(self) -> Optional[str]:
        return self._stop_signal

    @property
    def budget_cap(self) -> RowBudget:
        """The --stop-at-* cap (a RowBudget that never reaches without one): the Tune runner checks results against it."""
        return self._budget_cap

    def reclaim(self) -> None:
        """(Re)installs the SIGINT/SIGTERM handlers and absl logging.

        Runners call it after `ray.init`, which takes SIGTERM; importing RLlib raises the root
        logger's level to ERROR, which would silence the progress lines.
        """
        logging.use_absl_handler()
        logging.set_verbosity(self._verbosity)
        if threading.current_thread() is not threading.main_thread():
            logging.warning("not on the main thread: SIGINT/SIGTERM will not stop the run gracefully")
            return
        for number in _SIGNALS:
            previous = signal.signal(number, self._on_signal)
            self._previous_handlers.setdefault(number, previous)

    @contextlib.contextmanager
    def signals_stop_at_once(self) -> Iterator[None]:
        """For work after `finish` that cannot poll `stop_requested` (the upload): SIGINT/SIGTERM raise
        KeyboardInterrupt there and then, and become the run's `stop_signal`."""
        self._stop_at_once = True
        self.reclaim()
        try:
            yield
        finally:
            self._stop_at_once = False
            self._restore_signals()

    def _restore_signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for number, handler in self._previous_handlers.items():
                signal.signal(number, handler)
        self._previous_handlers.clear()

    def _on_signal(self, number: int, frame) -> None:
        name = signal.Signals(number).name
        _cancel_failure_alarm()
        if self._stop_at_once:
            self._stop_signal = self._stop_signal or name
            logging.warning("%s: stopping now", name)
            raise KeyboardInterrupt(name)
        if self._stop_signal is not None:  # a second signal (after a reached budget cap, the first one is graceful)
            logging.warning("%s again: stopping now, without a final checkpoint", name)
            raise KeyboardInterrupt(name)
        self._stop_signal = name
        self._stop.set()
        logging.warning("%s: finishing this iteration, then a final checkpoint (send it again to stop now)", name)

    # -- records -----------------------------------------------------------------------------

    def _write_manifest(self) -> None:
        self._manifest = dataclasses.replace(self._manifest, seed_streams=self._seeds.issued())
        records.write_json_atomically(str(self.results_dir / records.MANIFEST_FILE), self._manifest.to_dict())

    def _beat(self) -> None:
        while not self._heartbeat_stop.wait(self._heartbeat_s):
            try:
                with self._lock:
                    if self._heartbeat_stop.is_set():
                        return
                    self._manifest = dataclasses.replace(
                        self._manifest, heartbeat=dataclasses.replace(self._manifest.heartbeat, at=utc_now()))
                    self._write_summary()
                    self._write_manifest()
            except OSError as error:  # a full disk must not kill the run; the next beat retries
                logging.warning("heartbeat write failed: %s", error)
