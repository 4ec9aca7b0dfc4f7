"""Finding recorded runs on disk: every results/[smoke/]<run-id>/ below some folders, typed.

    from rl.harness import find_run, find_runs

    run = find_run("20261201T011500Z-3f9a2c", [workspace_root])   # RunNotFound (a UsageError) naming the fix
    run.manifest.status, run.status, run.summary()["metrics"]      # status: "crashed" for a dead running run
    runs, damaged = scan_runs([workspace_root])                    # readable runs, and folders that are not

What `rl-harness runs | show | diff` print of them is `commands/catalog.py`'s.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from rl.harness.errors import UsageError
from rl.harness.run import buildinfo, layout, metrics_stream, records
from rl.harness.run.manifest import RunManifest, read_manifest
from rl.harness.run.status import COMPLETED, run_id_problem

# Folders never searched for results (build trees, artifacts, virtual environments, VCS).
_SKIPPED = frozenset({"artifacts", "node_modules", "__pycache__", "venv", ".venv"})
_MAX_DEPTH = 8


@dataclasses.dataclass(frozen=True)
class Run:
    """A recorded run found on disk: its results folder and its (typed) manifest."""

    run_dir: str
    manifest: RunManifest

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def status(self) -> str:
        return self.manifest.effective_status

    def summary(self) -> dict:
        """summary.json; for a run that did not complete, its counters and curves as far as metrics.jsonl goes.

        A killed run's summary is as old as its last heartbeat (or checkpoint), while every row it
        logged is in metrics.jsonl: `runs`, `show` and `compare` then agree with the metrics.
        """
        path = os.path.join(self.run_dir, records.SUMMARY_FILE)
        summary = records.read_json(path, "run summary") if os.path.exists(path) else {}
        if self.status == COMPLETED:
            return summary
        rows = self._metrics_rows()
        if rows is None or len(rows) <= (summary.get("rows") or 0):
            return summary
        caught_up = {**summary, "rows": len(rows)}
        if not summary.get("trial_metrics"):  # rows of several trials cannot be told apart here
            keys = {*(summary.get("metrics") or {}), *metrics_stream.DEFAULT_SUMMARY_KEYS}
            caught_up["metrics"] = metrics_stream.curve_summary(metrics_stream.curves_of_rows(rows, keys))
        return caught_up

    def _metrics_rows(self) -> list[dict] | None:
        try:
            places = layout.RunLayout.of_run(self.run_dir, self.manifest).artifact_places(self.manifest)
        except records.RecordError:
            return None
        for place in places:
            path = place / records.METRICS_FILE
            if path.is_file():
                try:
                    return records.read_json_lines(str(path))
                except (OSError, records.RecordError):
                    return None
        return None


class RunNotFound(UsageError, LookupError):
    """No run (or several) by that id under the searched folders; the message names where to look."""


def _results_folders(root: str) -> Iterable[str]:
    """`root` itself if it holds runs, else every folder below it named `results` or holding runs (a
    `--results-dir myres` typed in the workspace)."""
    if any(layout.iter_run_dirs(root)):
        yield root
        return
    for folder, subfolders, _ in os.walk(root):
        depth = folder[len(root) :].count(os.sep)
        subfolders[:] = sorted(
            name
            for name in subfolders
            if not (name.startswith(".") or name.startswith("bazel-") or name in _SKIPPED) and depth < _MAX_DEPTH
        )
        if os.path.basename(folder) == "results" or any(layout.iter_run_dirs(folder)):
            subfolders[:] = []
            yield folder


@dataclasses.dataclass(frozen=True)
class DamagedRun:
    """A run folder whose manifest cannot be read: listed as damaged, never hiding the healthy runs beside it."""

    run_dir: str
    problem: str  # the RecordError's message: the file, where it breaks, and the fix

    @property
    def run_id(self) -> str:
        return os.path.basename(self.run_dir)


def scan_runs(roots: Iterable[str]) -> tuple[list[Run], list[DamagedRun]]:
    """(readable runs, damaged run folders) under `roots`, each sorted by run id."""
    runs, damaged = {}, {}
    for root in roots:
        for results in _results_folders(os.path.abspath(root)):
            for run_dir in layout.iter_run_dirs(results):
                key = os.path.realpath(run_dir)
                try:
                    runs.setdefault(key, Run(run_dir, read_manifest(run_dir)))
                except records.RecordError as error:
                    damaged.setdefault(key, DamagedRun(run_dir, str(error)))
    return (sorted(runs.values(), key=lambda run: run.run_id), sorted(damaged.values(), key=lambda run: run.run_id))


def find_runs(roots: Iterable[str]) -> list[Run]:
    """The readable runs under `roots` (scan_runs also names the damaged ones)."""
    return scan_runs(roots)[0]


def find_run(run_id: str, roots: Iterable[str]) -> Run:
    problem = run_id_problem(run_id)
    if problem:
        raise RunNotFound(problem)
    roots = list(roots)
    runs, damaged = scan_runs(roots)
    matches = [run for run in runs if run.run_id == run_id]
    broken = [run for run in damaged if run.run_id == run_id]
    if not matches and broken:
        raise records.RecordError(f"run {run_id} is damaged: {broken[0].problem}")
    if not matches:
        raise RunNotFound(
            f"no run {run_id!r} under {', '.join(roots)}; list runs with `{buildinfo.harness_command('runs')}` or pass"
            " --results-dir"
        )
    if len(matches) > 1:
        raise RunNotFound(
            f"run id {run_id!r} is in several folders ({', '.join(r.run_dir for r in matches)});"
            " pass --results-dir to pick one"
        )
    return matches[0]
