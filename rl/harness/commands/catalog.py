"""Finding runs on disk and explaining them: what `rl-harness runs | show | diff` print.

    runs = catalog.find_runs([workspace_root])        # every results/[smoke/]<run-id>/ below
    print("\n".join(catalog.format_runs(runs)))
    run = catalog.find_run("20261201T011500Z-3f9a2c", [workspace_root])
    print("\n".join(catalog.format_show(run)))
    print("\n".join(catalog.format_diff(run_a, run_b)))   # code, lock, build, seed, hardware, options
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterable, Optional

from rl.harness.errors import UsageError
from rl.harness.run import layout, records
from rl.harness.run.manifest import RunManifest, read_manifest
from rl.harness.run.status import crash_reason, effective_status, run_id_problem

# Folders never searched for results (build trees, artifacts, virtual environments, VCS).
_SKIPPED = frozenset({"artifacts", "node_modules", "__pycache__", "venv", ".venv"})
_MAX_DEPTH = 8

# What `diff` compares, by manifest section (first match wins, so the lock hash inside `build`
# reads as "lock"); run-specific fields (times, pids, paths) are not compared.
DIFF_SECTIONS = {
    "code": ("experiment", "code"),
    "lock": ("build.lock_sha256",),
    "build": ("build",),
    "seed": ("seed", "seed_streams"),
    "hardware": ("hardware",),
    "options": ("options", "runner", "parent_run"),
    "versions": ("versions",),
    "reproduction": ("reproduction",),
}
_NOT_COMPARED = ("options.results_dir", "options.artifacts_dir", "options.run_id")


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
        return effective_status(self.manifest)

    def summary(self) -> dict:
        path = os.path.join(self.run_dir, records.SUMMARY_FILE)
        return records.read_json(path, "run summary") if os.path.exists(path) else {}


class RunNotFound(UsageError, LookupError):
    """No run (or several) by that id under the searched folders; the message names where to look."""


def _results_folders(root: str) -> Iterable[str]:
    """`root` itself if it holds runs, else every folder named `results` below it."""
    if any(layout.iter_run_dirs(root)):
        yield root
        return
    for folder, subfolders, _ in os.walk(root):
        depth = folder[len(root):].count(os.sep)
        subfolders[:] = sorted(
            name for name in subfolders
            if not (name.startswith(".") or name.startswith("bazel-") or name in _SKIPPED) and depth < _MAX_DEPTH
        )
        if os.path.basename(folder) == "results":
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
    return (sorted(runs.values(), key=lambda run: run.run_id),
            sorted(damaged.values(), key=lambda run: run.run_id))


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
            f"no run {run_id!r} under {', '.join(roots)}; list runs with `rl-harness runs` or pass --results-dir"
        )
    if len(matches) > 1:
        raise RunNotFound(f"run id {run_id!r} is in several folders ({', '.join(r.run_dir for r in matches)});"
                          " pass --results-dir to pick one")
    return matches[0]


def _last(summary: dict, key: str) -> Optional[Any]:
    return (summary.get("metrics", {}).get(key) or {}).get("last")


def format_runs(runs: list[Run], damaged: Iterable[DamagedRun] = ()) -> list[str]:
    damaged = list(damaged)
    if not runs and not damaged:
        return ["no runs found"]
    header = ("RUN ID", "STATUS", "EXPERIMENT", "ROWS", "ENV STEPS", "FOLDER")
    table = [header]
    for run in runs:
        summary = run.summary()
        table.append((
            run.run_id,
            run.status,
            run.manifest.experiment.module or "?",
            str(summary.get("rows", "-")),
            str(_last(summary, "num_env_steps_sampled_lifetime") or "-"),
            run.run_dir,
        ))
    table.extend((run.run_id, "damaged", "?", "-", "-", run.run_dir) for run in damaged)
    widths = [max(len(row[column]) for row in table) for column in range(len(header) - 1)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]).rstrip() for row in table]
    return lines + [f"damaged {run.run_id}: {run.problem}" for run in damaged]


def flatten(record: Any, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}, "c": [1, 2]}` -> `{"a.b": 1, "c": [1, 2]}` (lists are compared whole)."""
    if not isinstance(record, dict) or not record:
        return {prefix: record} if prefix else {}
    flat = {}
    for key, value in record.items():
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def format_show(run: Run) -> list[str]:
    manifest = run.manifest.to_dict()
    lines = [f"run {run.run_id}: {run.status}"]
    reason = crash_reason(run.manifest)
    if reason:
        lines.append(f"  crashed: {reason}; resume with --resume-from {run.run_id}")
    lines.append(f"  results: {run.run_dir}")
    for key, value in sorted(flatten({k: v for k, v in manifest.items() if k not in ("run_id", "status")}).items()):
        lines.append(f"  {key}: {json.dumps(value)}")
    return lines


def _section_of(key: str) -> Optional[str]:
    if any(key == skip or key.startswith(skip + ".") for skip in _NOT_COMPARED):
        return None
    for section, prefixes in DIFF_SECTIONS.items():
        if any(key == prefix or key.startswith(prefix + ".") for prefix in prefixes):
            return section
    return None


def diff(run_a: Run, run_b: Run) -> list[tuple[str, str, Any, Any]]:
    """(section, key, value in a, value in b) for every compared field that differs."""
    flat_a, flat_b = flatten(run_a.manifest.to_dict()), flatten(run_b.manifest.to_dict())
    differences = []
    for key in sorted(set(flat_a) | set(flat_b)):
        section = _section_of(key)
        if section and flat_a.get(key) != flat_b.get(key):
            differences.append((section, key, flat_a.get(key), flat_b.get(key)))
    return differences


def format_diff(run_a: Run, run_b: Run) -> list[str]:
    lines = [f"a: {run_a.run_id} ({run_a.status})", f"b: {run_b.run_id} ({run_b.status})"]
    differences = diff(run_a, run_b)
    if not differences:
        return lines + [f"no differences in {', '.join(DIFF_SECTIONS)}"]
    for section, key, value_a, value_b in differences:
        lines.append(f"  {section:<8} {key}: {json.dumps(value_a)} -> {json.dumps(value_b)}")
    counts = {}
    for section, *_ in differences:
        counts[section] = counts.get(section, 0) + 1
    same = [section for section in DIFF_SECTIONS if section not in counts]
    lines.append("differ: " + ", ".join(f"{section} ({count})" for section, count in counts.items())
                 + (f"; same: {', '.join(same)}" if same else ""))
    return lines
