"""Explaining runs found on disk (`run/finder.py`): what `rl-harness runs | show | diff` print.

runs = finder.find_runs([workspace_root])         # every results/[smoke/]<run-id>/ below
print("\n".join(catalog.format_runs(catalog.select_runs(runs, recipe="reward_only", last=10)[0])))
rows = catalog.run_rows(runs)                     # runs as data: what `runs --json` and `runs --csv` print
run = finder.find_run("20261201T011500Z-3f9a2c", [workspace_root])
print("\n".join(catalog.format_show(run)))
print("\n".join(catalog.format_diff(run_a, run_b)))   # code, lock, build, seed, hardware, options
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
from collections.abc import Iterable
from typing import Any

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


def _last(summary: dict, key: str) -> Any | None:
    return (summary.get("metrics", {}).get(key) or {}).get("last")


def _started(run: Run) -> float:
    return parse_time(run.manifest.started_at) if run.manifest.started_at else -math.inf


def is_recipe(run: Run, recipe: str) -> bool:
    """Whether `run` is of `recipe`: its dotted module, or that module's last parts (`mess3.reward_only`)."""
    module = run.manifest.experiment.module or ""
    return module == recipe or module.endswith("." + recipe)


# `runs --sort`: the first is the default (oldest start first); each sorts on, then by start and id.
SORT_KEYS = ("started", "status", "experiment", "duration", "id")


def _sort_key(key: str):
    def by(run: Run) -> tuple:
        first = {
            "started": (),
            "status": (run.status,),
            "experiment": (run.manifest.experiment.module or "",),
            "duration": (_seconds(run.manifest),),
            "id": (run.run_id,),
        }[key]
        return (*first, _started(run), run.run_id)

    return by


def select_runs(
    runs: Iterable[Run],
    damaged: Iterable[DamagedRun] = (),
    *,
    recipe: str | None = None,
    status: str | None = None,
    last: int | None = None,
    smoke: bool | None = None,
    sort: str = SORT_KEYS[0],
) -> tuple[list[Run], list[DamagedRun]]:
    """What `runs` lists: the runs of `recipe` with `status`, smoke or full ones only when `smoke` says which,
    the `last` N started, in the order of `sort` (SORT_KEYS; oldest start first by default).

    A damaged run's recipe cannot be read, so it stays listed unless `status` names another status.
    """
    chosen = sorted(
        (
            run
            for run in runs
            if (recipe is None or is_recipe(run, recipe))
            and (status is None or run.status == status)
            and (smoke is None or run.manifest.options.get("smoke") is smoke)
        ),
        key=lambda run: (_started(run), run.run_id),
    )
    chosen = sorted(chosen[-last:] if last else chosen, key=_sort_key(sort))
    return chosen, [run for run in damaged if status in (None, DAMAGED)]


def _start_time(manifest: RunManifest) -> str:
    if not manifest.started_at:
        return "-"
    return datetime.datetime.fromisoformat(manifest.started_at).astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")


def _seconds(manifest: RunManifest) -> float:
    """`manifest.duration_seconds`, -1 when unknown (a sort key)."""
    found = manifest.duration_seconds
    return -1.0 if found is None else found


def _duration(manifest: RunManifest) -> str:
    """Start to end (or to the last heartbeat), as `1h02m`, `1m15s` or `42s`."""
    if (found := manifest.duration_seconds) is None:
        return "-"
    seconds = round(found)
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
        table.append(
            (
                run.run_id,
                run.status,
                run.manifest.experiment.module or "?",
                _start_time(run.manifest),
                _duration(run.manifest),
                str(summary.get("rows", "-")),
                _shown(_last(summary, "num_env_steps_sampled_lifetime")),
                _shown(final_metrics(summary).get(metric_keys.RETURN)),
                run.run_dir,
            )
        )
    table.extend((run.run_id, DAMAGED, "?", "-", "-", "-", "-", "-", run.run_dir) for run in damaged)
    widths = [max(len(row[column]) for row in table) for column in range(len(header) - 1)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]).rstrip() for row in table]
    return lines + [f"damaged {run.run_id}: {run.problem}" for run in damaged]


def run_rows(runs: Iterable[Run], damaged: Iterable[DamagedRun] = ()) -> list[dict[str, Any]]:
    """One record per run, as `runs --json` prints them: who ran what, when, at which code, with which overrides,
    and what came out (each summarised metric's final value; the outcome's numbers, by dotted path, where a
    study's scores are read). A damaged run: its id, `damaged`, its folder and the problem."""
    rows = []
    for run in runs:
        manifest, summary = run.manifest, run.summary()
        library = manifest.code.get("library") or {}
        outcome = flatten(summary.get("outcome") or {})
        rows.append(
            {
                "run_id": run.run_id,
                "experiment": manifest.experiment.module,
                "status": run.status,
                "seed": manifest.seed,
                "smoke": manifest.smoke,
                "started_at": manifest.started_at,
                "duration_s": manifest.duration_seconds,
                "commit": library.get("commit"),
                "dirty": library.get("dirty"),
                "overrides": dict(manifest.options.get("set") or {}),
                "final_metrics": final_metrics(summary),
                "outcome": {key: value for key, value in outcome.items() if _is_number(value)},
                "folder": run.run_dir,
            }
        )
    rows += [
        {"run_id": run.run_id, "status": DAMAGED, "folder": run.run_dir, "problem": run.problem} for run in damaged
    ]
    return rows


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What every run has (no run at all still makes a table with these columns), and its records spread into a
# column per key, `overrides.<key>` and so on.
_RUN_COLUMNS = ("run_id", "experiment", "status", "seed", "smoke", "started_at", "duration_s", "commit", "dirty")
_NESTED_COLUMNS = ("overrides", "final_metrics", "outcome")


def flat_rows(rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows): `run_rows` with their nested records spread into `overrides.<key>`, `final_metrics.<key>`
    and `outcome.<path>` columns (every key any run has, sorted within its group; missing where a run has none)."""
    flat = [
        {
            **{key: value for key, value in row.items() if key not in _NESTED_COLUMNS},
            **{f"{group}.{key}": value for group in _NESTED_COLUMNS for key, value in (row.get(group) or {}).items()},
        }
        for row in rows
    ]
    plain = list(dict.fromkeys((*_RUN_COLUMNS, *(key for row in rows for key in row if key not in _NESTED_COLUMNS))))
    nested = [
        key
        for group in _NESTED_COLUMNS
        for key in sorted({key for row in flat for key in row if key.startswith(f"{group}.")})
    ]
    return [*plain, *nested], flat


def runs_csv(rows: list[dict[str, Any]]) -> str:
    """`run_rows` as CSV, one row per run (`flat_rows`' columns)."""
    columns, flat = flat_rows(rows)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    # A list or a record (an override may be one) as JSON, so that a cell reads back as what was recorded.
    writer.writerows(
        {key: json.dumps(value) if isinstance(value, (list, dict)) else value for key, value in row.items()}
        for row in flat
    )
    return buffer.getvalue()


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
                shown[stem] = (
                    format_number(value)
                    if low == high
                    else f"{format_number(value)} [{format_number(low)}, {format_number(high)}]"
                )
            continue
        shown[key] = format_number(value)
    return shown


_INTERVAL = frozenset({"mean", "low", "high"})


def _cells(record: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], dict] | None:
    """{path: cell} when every leaf of `record` lies in a cell (a record of two or more numbers, not an interval),
    all cells with the same keys; else None."""
    if not isinstance(record, dict) or not record:
        return None
    if all(_is_number(value) for value in record.values()):
        return {path: record} if len(record) > 1 and set(record) != _INTERVAL else None
    found: dict[tuple[str, ...], dict] = {}
    for key, value in record.items():
        below = _cells(value, (*path, str(key)))
        if below is None:
            return None
        found.update(below)
    return found if len({tuple(cell) for cell in found.values()}) == 1 else None


def _table_lines(name: str, cells: dict[tuple[str, ...], dict]) -> list[str]:
    """An outcome record of cells as one table: a row per last path part (a layer), a column per path above it (a
    distribution, an encoder); a column with the same numbers as one before it (one encoder read by two heads) is
    named under the table instead of printed again."""
    columns: dict[str, dict[str, dict]] = {}
    # The shorter path first within its first part, so that a column repeated under a longer name keeps the short one.
    order = list(dict.fromkeys(path[0] for path in cells))
    for path in sorted(cells, key=lambda path: (order.index(path[0]), len(path), path)):
        columns.setdefault(".".join(path[:-1]) or name, {})[path[-1]] = cells[path]
    kept: dict[str, list[str]] = {}
    for column, rows in columns.items():
        same = next((other for other in kept if columns[other] == rows), None)
        kept.setdefault(same or column, []).extend([column] if same else [])
    rows = list(dict.fromkeys(row for column in kept for row in columns[column]))
    keys = list(next(iter(cells.values())))
    table = [["", *kept]] + [
        [
            row,
            *(
                " / ".join(format_number(columns[column][row][key]) for key in keys) if row in columns[column] else "-"
                for column in kept
            ),
        ]
        for row in rows
    ]
    widths = [max(len(line[index]) for line in table) for index in range(len(table[0]))]
    lines = [f"  {name} ({' / '.join(keys)}):"]
    lines += ["    " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]
    repeats = [
        f"{column}: {', '.join(other.removeprefix(column + '.') for other in others)}"
        for column, others in kept.items()
        if others
    ]
    return lines + ([f"    the same numbers also under {'; '.join(repeats)}"] if repeats else [])


def _outcome_lines(outcome: dict, finals: dict[str, Any]) -> list[str]:
    """The outcome: its scores (numbers and intervals) listed, its records of cells as tables, and nothing that
    repeats a final metric (the last value of a metric the recipe also returned)."""
    tables = {key: cells for key, value in outcome.items() if (cells := _cells(value)) is not None}
    listed = {
        key: value
        for key, value in outcome.items()
        if key not in tables and not (key in finals and finals[key] == value)
    }
    shown = _intervals(flatten(listed))
    lines = (["  outcome:"] + [f"    {key}: {value}" for key, value in sorted(shown.items())]) if shown else []
    for key, cells in tables.items():
        lines += _table_lines(key, cells)
    return lines


def resume_command(run: Run) -> str:
    """The command that resumes `run` from its newest checkpoint, with the seed and folders it ran with."""
    manifest = run.manifest
    build = manifest.build or {}
    command = buildinfo.command_words(
        bool(build.get("built_with_bazel") or build.get("target")),
        build.get("target"),
        manifest.experiment.module or "<recipe>",
    )
    command += ["--resume-from", run.run_id, "--seed", str(manifest.seed)]
    if manifest.smoke:
        command.append("--smoke")
    for option in ("results_dir", "artifacts_dir"):
        if manifest.options.get(option):
            command += [f"--{option.replace('_', '-')}", str(manifest.options[option])]
    return buildinfo.join(command)


def format_show(run: Run, *, full: bool = False) -> list[str]:
    """Results first (status, the outcome's scores and tables, budget, final metrics, outputs), then a short
    provenance block.

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
    lines.append(
        f"  experiment: {manifest.experiment.module or '?'}  seed {manifest.seed}"
        f"{'  (smoke)' if manifest.smoke else ''}"
    )
    overrides = manifest.options.get("set") or {}
    if overrides:
        lines.append("  overrides: " + ", ".join(f"{name}={value}" for name, value in sorted(overrides.items())))
    finals = final_metrics(summary)
    lines += _outcome_lines(summary.get("outcome") or {}, finals)
    stop = getattr(manifest.runner, "stop", None) or {}
    reached = ", ".join(
        f"{key} {format_number(finals[key])}"
        for key in ("training_iteration", "num_env_steps_sampled_lifetime")
        if finals.get(key) is not None
    )
    bounds = ", ".join(f"{key} {format_number(value)}" for key, value in sorted(stop.items()) if value is not None)
    lines.append(
        f"  budget: {summary.get('rows', 0)} rows{'; reached ' + reached if reached else ''}"
        f"{' of ' + bounds if bounds else ''}"
    )
    if finals:
        lines.append("  final metrics:")
        width = max(map(len, finals))
        lines += [
            f"    {key:<{width}}  {format_number(value) if value is not None else '-'}" for key, value in finals.items()
        ]
    lines.append(f"  results: {run.run_dir}")
    if manifest.outputs:
        lines.append(f"  outputs: {', '.join(entry.name for entry in manifest.outputs)}")
    if manifest.checkpoints:
        lines.append(f"  checkpoints: {len(manifest.checkpoints)} (last {manifest.checkpoints[-1].path})")
    if manifest.rolling_checkpoints:
        lines.append("  rolling checkpoint: " + ", ".join(entry.path for entry in manifest.rolling_checkpoints))
    build = manifest.build or {}
    profile = ((manifest.hardware or {}).get("profile") or {}).get("name", "?")
    lines += [
        "provenance:",
        (
            f"  code: experiment {_commit(manifest.code.get('experiment_repo'))},"
            f" library {_commit(manifest.code.get('library'))}"
        ),
        (
            f"  build: hash {str(build.get('build_hash') or 'none')[:12]}, lock {str(build.get('lock_sha256') or '?')[:12]},"
            f" target {build.get('target') or '-'}"
        ),
        f"  hardware: profile {profile}; versions "
        + ", ".join(f"{name} {version}" for name, version in sorted((manifest.versions or {}).items())),
        f"  started {manifest.started_at or '?'}, ended {manifest.ended_at or '-'}",
    ]
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


def _section_of(key: str) -> str | None:
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
    lines.append(
        "differ: "
        + ", ".join(f"{section} ({count})" for section, count in counts.items())
        + (f"; same: {', '.join(same)}" if same else "")
    )
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
