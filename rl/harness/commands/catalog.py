"""Explaining runs found on disk (`run/finder.py`): what `rl-harness runs | show | diff` print.

    runs = finder.find_runs([workspace_root])         # every results/[smoke/]<run-id>/ below
    print("\n".join(catalog.format_runs(catalog.select_runs(runs, experiment="reward_only", last=10)[0])))
    run = finder.find_run("20261201T011500Z-3f9a2c", [workspace_root])
    print("\n".join(catalog.format_show(run)))
    print("\n".join(catalog.format_diff(run_a, run_b)))   # code, lock, build, seed, hardware, options
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any, Iterable, Optional

from rl.harness.run import buildinfo, metric_keys, platform
from rl.harness.run.finder import DamagedRun, Run
from rl.harness.run.manifest import RunManifest
from rl.harness.run.status import COMPLETED, CRASHED, FAILED, INTERRUPTED, RUNNING, parse_time

DAMAGED = "damaged"  # what `runs` lists for a folder whose manifest cannot be read
LISTED_STATUSES = (RUNNING, COMPLETED, FAILED, INTERRUPTED, CRASHED, DAMAGED)  # `runs --status` choices

# What `diff` compares, by manifest section (first match wins, so the lock hash inside `build`
# reads as "lock"); run-specific fields (times, pids, paths) are not compared.
DIFF_SECTIONS = {
    "code": ("experiment", "code"),
    "lock": ("build.lock_sha256",),
    "build": ("build",),
    "seed": ("seed", "seed_streams"),
    "hardware": ("hardware",),
    "platform": ("platform",),  # the numeric platform: each differing field by name (run/platform.py)
    "options": ("options", "runner", "parent_run"),
    "versions": ("versions",),
    "reproduction": ("reproduction",),
}
_NOT_COMPARED = ("options.results_dir", "options.artifacts_dir", "options.run_id")


def _last(summary: dict, key: str) -> Optional[Any]:
    return (summary.get("metrics", {}).get(key) or {}).get("last")


def _started(run: Run) -> float:
    return parse_time(run.manifest.started_at) if run.manifest.started_at else -math.inf


def is_experiment(run: Run, experiment: str) -> bool:
    """Whether `run` is of `experiment`: its dotted module, or that module's last parts (`mess3.reward_only`)."""
    module = run.manifest.experiment.module or ""
    return module == experiment or module.endswith("." + experiment)


# `runs --sort`: the first is the default (oldest start first); each sorts on, then by start and id.
SORT_KEYS = ("started", "status", "experiment", "duration", "id")


def _sort_key(key: str):
    def by(run: Run) -> tuple:
        first = {"started": (), "status": (run.status,), "experiment": (run.manifest.experiment.module or "",),
                 "duration": (_seconds(run.manifest),), "id": (run.run_id,)}[key]
        return (*first, _started(run), run.run_id)
    return by


def select_runs(runs: Iterable[Run], damaged: Iterable[DamagedRun] = (), *, experiment: Optional[str] = None,
                status: Optional[str] = None, last: Optional[int] = None, smoke: Optional[bool] = None,
                sort: str = SORT_KEYS[0]) -> tuple[list[Run], list[DamagedRun]]:
    """What `runs` lists: the runs of `experiment` with `status`, smoke or full ones only when `smoke` says which,
    the `last` N started, in the order of `sort` (SORT_KEYS; oldest start first by default).

    A damaged run's experiment cannot be read, so it stays listed unless `status` names another status.
    """
    chosen = sorted((run for run in runs if (experiment is None or is_experiment(run, experiment))
                     and (status is None or run.status == status)
                     and (smoke is None or run.manifest.options.get("smoke") is smoke)),
                    key=lambda run: (_started(run), run.run_id))
    chosen = sorted(chosen[-last:] if last else chosen, key=_sort_key(sort))
    return chosen, [run for run in damaged if status in (None, DAMAGED)]


def _start_time(manifest: RunManifest) -> str:
    if not manifest.started_at:
        return "-"
    return datetime.datetime.fromisoformat(manifest.started_at).astimezone(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%MZ")


def _seconds(manifest: RunManifest) -> float:
    """Start to end; for a run without an end (running, crashed), start to its last heartbeat; -1 when unknown."""
    end = manifest.ended_at or (manifest.heartbeat.at if manifest.heartbeat is not None else None)
    if not manifest.started_at or not end:
        return -1.0
    return max(0.0, parse_time(end) - parse_time(manifest.started_at))


def _duration(manifest: RunManifest) -> str:
    """`_seconds` as `1h02m`, `3m05s` or `12s`; `-` when unknown."""
    if (elapsed := _seconds(manifest)) < 0:
        return "-"
    seconds = round(elapsed)
    hours, minutes = seconds // 3600, seconds // 60 % 60
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds % 60:02d}s" if minutes else f"{seconds}s"


def format_runs(runs: list[Run], damaged: Iterable[DamagedRun] = ()) -> list[str]:
    """A table, one row per run as given (select_runs orders them): when it started and for how long, how far it
    got and its final return (the last finite one)."""
    damaged = list(damaged)
    if not runs and not damaged:
        return ["no runs found"]
    header = ("RUN ID", "STATUS", "EXPERIMENT", "STARTED", "DURATION", "ROWS", "ENV STEPS", "RETURN", "FOLDER")
    table = [header]
    for run in runs:
        summary = run.summary()
        table.append((
            run.run_id,
            run.status,
            run.manifest.experiment.module or "?",
            _start_time(run.manifest),
            _duration(run.manifest),
            str(summary.get("rows", "-")),
            _shown(_last(summary, "num_env_steps_sampled_lifetime")),
            _shown(final_metrics(summary).get(metric_keys.RETURN)),
            run.run_dir,
        ))
    table.extend((run.run_id, DAMAGED, "?", "-", "-", "-", "-", "-", run.run_dir) for run in damaged)
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


def format_number(value: Any) -> str:
    """A metric as people read it: integers without a decimal point, others to 6 significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def final_metrics(summary: dict) -> dict[str, Any]:
    """Each summarised metric's last value, or its last finite one when the final row had none."""
    finals = {}
    for key, entry in sorted((summary.get("metrics") or {}).items()):
        value = entry.get("last")
        if value is None:
            finite = [y for _, y in entry.get("curve") or [] if isinstance(y, (int, float)) and y == y]
            value = finite[-1] if finite else None
        finals[key] = value
    return finals


def _commit(state: Any) -> str:
    if not isinstance(state, dict) or not state.get("commit"):
        return "unknown"
    return f"{state['commit'][:12]}{' (dirty)' if state.get('dirty') else ''}"


def _intervals(flat: dict[str, Any]) -> dict[str, str]:
    """Scalar outcome entries as text; `x.mean`, `x.low`, `x.high` become one `x: mean [low, high]`."""
    shown = {}
    for key, value in flat.items():
        if isinstance(value, (list, dict)) or value is None:
            continue
        stem, _, part = key.rpartition(".")
        if part in ("mean", "low", "high") and all(f"{stem}.{end}" in flat for end in ("mean", "low", "high")):
            if part == "mean":
                low, high = flat[f"{stem}.low"], flat[f"{stem}.high"]
                shown[stem] = (format_number(value) if low == high else
                               f"{format_number(value)} [{format_number(low)}, {format_number(high)}]")
            continue
        shown[key] = format_number(value)
    return shown


def resume_command(run: Run) -> str:
    """The command that resumes `run` from its newest checkpoint, with the seed and folders it ran with."""
    manifest = run.manifest
    build = manifest.build or {}
    command = buildinfo.command_words(bool(build.get("built_with_bazel") or build.get("target")), build.get("target"),
                                      manifest.experiment.module or "<recipe>")
    command += ["--resume-from", run.run_id, "--seed", str(manifest.seed)]
    if manifest.smoke:
        command.append("--smoke")
    for option in ("results_dir", "artifacts_dir"):
        if manifest.options.get(option):
            command += [f"--{option.replace('_', '-')}", str(manifest.options[option])]
    return buildinfo.join(command)


def format_show(run: Run, *, full: bool = False) -> list[str]:
    """Results first (status, budget, final metrics, outcome, outputs), then a short provenance block.

    `full` appends every manifest field, per-file source hashes included (`show --full`).
    """
    manifest, summary = run.manifest, run.summary()
    lines = [f"run {run.run_id}: {run.status}"]
    reason = manifest.crash_reason()
    if reason:
        lines.append(f"  crashed: {reason}")
    if run.status in (CRASHED, INTERRUPTED):
        lines.append(f"  resume: {resume_command(run)}")
    if manifest.error is not None:
        lines.append(f"  error: {manifest.error.type}: {manifest.error.message}")
    lines.append(f"  experiment: {manifest.experiment.module or '?'}  seed {manifest.seed}"
                 f"{'  (smoke)' if manifest.smoke else ''}")
    overrides = manifest.options.get("set") or {}
    if overrides:
        lines.append("  overrides: " + ", ".join(f"{name}={value}" for name, value in sorted(overrides.items())))
    lines.append(f"  results: {run.run_dir}")
    finals = final_metrics(summary)
    stop = getattr(manifest.runner, "stop", None) or {}
    reached = ", ".join(f"{key} {format_number(finals[key])}" for key in ("training_iteration",
                        "num_env_steps_sampled_lifetime") if finals.get(key) is not None)
    bounds = ", ".join(f"{key} {format_number(value)}" for key, value in sorted(stop.items()) if value is not None)
    lines.append(f"  budget: {summary.get('rows', 0)} rows{'; reached ' + reached if reached else ''}"
                 f"{' of ' + bounds if bounds else ''}")
    if finals:
        lines.append("  final metrics:")
        width = max(map(len, finals))
        lines += [f"    {key:<{width}}  {format_number(value) if value is not None else '-'}"
                  for key, value in finals.items()]
    outcome = _intervals(flatten(summary.get("outcome") or {}))
    if outcome:
        lines.append("  outcome:")
        lines += [f"    {key}: {value}" for key, value in sorted(outcome.items())]
    if manifest.outputs:
        lines.append(f"  outputs: {', '.join(entry.name for entry in manifest.outputs)}")
    if manifest.checkpoints:
        lines.append(f"  checkpoints: {len(manifest.checkpoints)} (last {manifest.checkpoints[-1].path})")
    if manifest.rolling_checkpoints:
        lines.append("  rolling checkpoint: " + ", ".join(entry.path for entry in manifest.rolling_checkpoints))
    build = manifest.build or {}
    profile = ((manifest.hardware or {}).get("profile") or {}).get("name", "?")
    lines += ["provenance:",
              f"  code: experiment {_commit(manifest.code.get('experiment_repo'))},"
              f" library {_commit(manifest.code.get('library'))}",
              f"  build: hash {str(build.get('build_hash') or 'none')[:12]}, lock {str(build.get('lock_sha256') or '?')[:12]},"
              f" target {build.get('target') or '-'}",
              f"  hardware: profile {profile}; versions "
              + ", ".join(f"{name} {version}" for name, version in sorted((manifest.versions or {}).items())),
              f"  started {manifest.started_at or '?'}, ended {manifest.ended_at or '-'}"]
    lines += _platform_lines(manifest)
    if not full:
        lines.append(f"  (every field, per-file hashes included: show {run.run_id} --full; as JSON: --json)")
        return lines
    record = manifest.to_dict()
    lines.append("all fields:")
    for key, value in sorted(flatten({k: v for k, v in record.items() if k not in ("run_id", "status")}).items()):
        lines.append(f"  {key}: {json.dumps(value)}")
    return lines


def _platform_lines(manifest: RunManifest) -> list[str]:
    """The numeric platform under `provenance:` (what bit-identical reproduction depends on)."""
    described = platform.describe(manifest.platform)
    return [f"  platform: {described[0]}", *(f"    {line}" for line in described[1:])]


def _section_of(key: str) -> Optional[str]:
    if any(key == skip or key.startswith(skip + ".") for skip in _NOT_COMPARED):
        return None
    for section, prefixes in DIFF_SECTIONS.items():
        if any(key == prefix or key.startswith(prefix + ".") for prefix in prefixes):
            return section
    return None


def _recorded(value: Any) -> Any:
    """None for an empty dict or list: a manifest that records `set: {}` and one without `set` say the same."""
    return None if value in ({}, []) else value


def diff(run_a: Run, run_b: Run) -> list[tuple[str, str, Any, Any]]:
    """(section, key, value in a, value in b) for every compared field that differs (empty and missing alike)."""
    flat_a, flat_b = flatten(run_a.manifest.to_dict()), flatten(run_b.manifest.to_dict())
    differences = []
    for key in sorted(set(flat_a) | set(flat_b)):
        section = _section_of(key)
        if section and _recorded(flat_a.get(key)) != _recorded(flat_b.get(key)):
            differences.append((section, key, flat_a.get(key), flat_b.get(key)))
    return differences


def format_diff(run_a: Run, run_b: Run) -> list[str]:
    lines = [f"a: {run_a.run_id} ({run_a.status})", f"b: {run_b.run_id} ({run_b.status})"]
    differences = diff(run_a, run_b)
    if not differences:
        return lines + [f"no differences in {', '.join(DIFF_SECTIONS)}"] + _final_metrics_diff(run_a, run_b)
    for section, key, value_a, value_b in differences:
        lines.append(f"  {section:<8} {key}: {json.dumps(value_a)} -> {json.dumps(value_b)}")
    counts = {}
    for section, *_ in differences:
        counts[section] = counts.get(section, 0) + 1
    same = [section for section in DIFF_SECTIONS if section not in counts]
    lines.append("differ: " + ", ".join(f"{section} ({count})" for section, count in counts.items())
                 + (f"; same: {', '.join(same)}" if same else ""))
    return lines + _final_metrics_diff(run_a, run_b)


def _final_metrics_diff(run_a: Run, run_b: Run) -> list[str]:
    """The final metrics side by side (results differ even where provenance does not)."""
    finals_a, finals_b = final_metrics(run_a.summary()), final_metrics(run_b.summary())
    keys = sorted(set(finals_a) | set(finals_b))
    if not keys:
        return []
    width = max(map(len, keys))
    rows = [f"  {key:<{width}}  {_shown(finals_a.get(key))} -> {_shown(finals_b.get(key))}" for key in keys]
    return ["final metrics (a -> b):", *rows]


def _shown(value: Any) -> str:
    return "-" if value is None else format_number(value)
