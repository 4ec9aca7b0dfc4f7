"""`rl-harness export --to mlflow <run-id | study-id>`: runs and studies into an MLflow tracking store, offline.

    rl-harness export --to mlflow 20261202T031703Z-b1b3c5 --python ~/mlflow/bin/python   # into ./mlflow.db
    rl-harness export --to mlflow <study-id> --results-dir experiments/mess3/results --tracking-uri sqlite:////data/m.db

A run becomes an MLflow run in the experiment named by its recipe's module; a study becomes the
experiment named by its id, with one MLflow run per member (its attempts' rows in order). Each
MLflow run carries: params (the run's `--set` overrides by key, `seed`, `smoke`, `commit`, `dirty`,
`build_hash`, `lock_sha256`; a member's `agent`), tags (`rl_harness.run_id`, `rl_harness.recipe`,
`rl_harness.status`, a member's `rl_harness.study_id` and `rl_harness.agent`, and MLflow's own
`mlflow.source.git.commit`), every numeric column of metrics.jsonl as a metric whose step is the
training iteration, and the outcome's numbers as `outcome/<path>` (a member's study scores also as
`score/<name>`). A run already in the experiment (by `rl_harness.run_id`) is left as it is.

MLflow is not in the harness's lock: MLflow's own client writes the store, run by `--python`, a
python that has MLflow (`mlflow_writer.py` imports nothing else). MLflow's file store is refused by
default since MLflow 3 and its SQLite schema belongs to its migrations, so neither is written by
hand (docs/harness.md, "Exporting to MLflow").
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from rl.harness import env_vars
from rl.harness.commands import catalog
from rl.harness.errors import HarnessError, UsageError
from rl.harness.run import buildinfo, finder, metric_keys, records
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import RunManifest
from rl.harness.run.status import COMPLETED, CRASHED, FAILED, INTERRUPTED, RUNNING, parse_time
from rl.harness.study import summary
from rl.harness.study.declaration import Study
from rl.harness.study.record import StudyRecord, find_study

TARGETS = ("mlflow",)
WRITER = pathlib.Path(__file__).with_name("mlflow_writer.py")
DEFAULT_STORE = "mlflow.db"  # MLflow's own default store, in the folder the command is typed in
INSTALL = "python3 -m venv ~/mlflow && ~/mlflow/bin/pip install mlflow-skinny sqlalchemy alembic"
_STATUSES = {COMPLETED: "FINISHED", FAILED: "FAILED", CRASHED: "FAILED", INTERRUPTED: "KILLED", RUNNING: "RUNNING"}
_NOT_A_NAME = re.compile(r"[^/\w.\- ]")  # what MLflow refuses in a metric or param name (on every system)


class ExportFailed(HarnessError):
    """MLflow's client stopped part way (exit 1): what it wrote stays, a second export adds the rest."""

    exit_status = 1


def mlflow_name(key: str) -> str:
    """`key` as MLflow accepts it: characters it refuses become `_`, no leading slash."""
    return _NOT_A_NAME.sub("_", key).lstrip("/")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _milliseconds(stamp: str | None) -> int | None:
    return round(parse_time(stamp) * 1000) if stamp else None


def _rows(artifacts_dir: pathlib.Path, run_id: str) -> list[dict]:
    path = artifacts_dir / records.METRICS_FILE
    if not path.exists():
        raise UsageError(
            f"metrics of run {run_id} are not on this machine ({path}); bring them with"
            f" `{buildinfo.harness_command('fetch', run_id)}`, or pass the --artifacts-dir they are under"
        )
    return records.read_json_lines(str(path))


def _metrics(rows: list[dict]) -> list[list]:
    """[key, value, timestamp ms, step] for every number of every row; the step is the training iteration."""
    found = []
    for number, row in enumerate(rows, start=1):
        step = row.get(metric_keys.ITERATION, number)
        logged = _milliseconds(row.get("harness/logged_at")) or 0
        found += [
            [mlflow_name(key), value, logged, step]
            for key, value in row.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
    return found


def mlflow_run(manifests: list[RunManifest], artifacts_dirs: list[pathlib.Path], outcome: dict, status: str) -> dict:
    """One MLflow run from a run's attempts (oldest first; the last one's records name it)."""
    last = manifests[-1]
    library = last.code.get("library") or {}
    recorded = {
        "seed": last.seed,
        "smoke": last.smoke,
        "commit": library.get("commit"),
        "dirty": library.get("dirty"),
        "build_hash": last.build.get("build_hash"),
        "lock_sha256": last.build.get("lock_sha256"),
    }
    params = {
        **{mlflow_name(key): _text(value) for key, value in (last.options.get("set") or {}).items()},
        **{key: _text(value) for key, value in recorded.items() if value is not None},
    }  # unknown: left out
    tags = {
        "rl_harness.run_id": last.run_id,
        "rl_harness.recipe": last.experiment.module or "",
        "rl_harness.status": status,
        "rl_harness.runs": ",".join(manifest.run_id for manifest in manifests),
    }
    if library.get("commit"):
        tags["mlflow.source.git.commit"] = library["commit"]
    rows = [row for manifest, folder in zip(manifests, artifacts_dirs) for row in _rows(folder, manifest.run_id)]
    metrics = _metrics(rows)
    step = metrics[-1][3] if metrics else 0
    metrics += [
        [mlflow_name(f"outcome/{key}"), value, _milliseconds(last.ended_at) or 0, step]
        for key, value in catalog.flatten(outcome).items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]
    return {
        "name": last.run_id,
        "start_ms": _milliseconds(manifests[0].started_at),
        "end_ms": _milliseconds(last.ended_at),
        "status": _STATUSES.get(status, "FAILED"),
        "params": params,
        "tags": tags,
        "metrics": metrics,
    }


def _of_run(run: finder.Run, artifacts_root: pathlib.Path | None) -> dict:
    folder = RunLayout.of_run(run.run_dir, run.manifest, artifacts_root).artifacts_dir
    found = (
        records.read_json(str(pathlib.Path(run.run_dir) / records.SUMMARY_FILE), "run summary")
        if (pathlib.Path(run.run_dir) / records.SUMMARY_FILE).exists()
        else {}
    )
    return mlflow_run([run.manifest], [folder], found.get("outcome") or {}, run.status)


def _of_study(
    folder: pathlib.Path, results_root: pathlib.Path, artifacts_root: pathlib.Path | None
) -> tuple[str, dict, Iterator[dict]]:
    record = StudyRecord.read(folder)
    declared = Study.from_description(record.grid)

    def members() -> Iterator[dict]:
        for member in record.members:
            if not member.runs:
                print(f"{member.member.name}: no run yet (pending), not exported")
                continue
            result = summary.load_member(results_root, member, artifacts_root)
            outcome = result.outcome()
            found = mlflow_run(list(result.manifests), list(result.artifacts_dirs), outcome, result.status)
            found["params"]["agent"] = member.agent
            found["tags"].update({"rl_harness.study_id": record.study_id, "rl_harness.agent": member.agent})
            step = found["metrics"][-1][3] if found["metrics"] else 0
            found["metrics"] += [
                [mlflow_name(f"score/{score.name}"), value, found["end_ms"] or 0, step]
                for score in declared.scores
                if (value := score.read(outcome)) is not None
            ]
            yield found

    return record.study_id, {"rl_harness.study_id": record.study_id, "rl_harness.module": record.module}, members()


def _python(given: pathlib.Path | None) -> str:
    """The python that runs MLflow's client: `given`, else this one when it has MLflow; UsageError otherwise."""
    if given is not None:
        if not given.is_file():
            raise UsageError(f"--python {given} is not a file; pass a python with MLflow ({INSTALL})")
        return str(given)
    if importlib.util.find_spec("mlflow") is None:
        raise UsageError(
            f"export --to mlflow needs a python with MLflow, and this one ({sys.executable}) has none:"
            f" `{INSTALL}`, then pass --python ~/mlflow/bin/python"
        )
    return sys.executable


def _write(python: str, header: dict, runs: Iterator[dict]) -> int:
    """Streams `header` then each run, one JSON line each, to MLflow's client in `python`; its exit status."""
    with tempfile.TemporaryFile("w+") as errors:  # a file, not a pipe: a chatty client never blocks the stream
        writer = subprocess.Popen([python, str(WRITER)], stdin=subprocess.PIPE, stderr=errors, text=True)
        try:
            for document in (header, *runs):
                writer.stdin.write(json.dumps(document) + "\n")
            writer.stdin.close()
        except BrokenPipeError:  # it stopped early: its last line says why
            pass
        status = writer.wait()
        errors.seek(0)
        problem = errors.read().strip().splitlines()
    if status == 2:
        raise UsageError(
            f"{problem[-1] if problem else 'MLflow refused the export'} ({python}); a python with MLflow"
            f" and its SQLite store: `{INSTALL}`, then --python ~/mlflow/bin/python"
        )
    if status != 0:
        raise ExportFailed(
            f"MLflow's client stopped (exit {status}): {problem[-1] if problem else 'no message'};"
            " what it wrote stays, export again to add the rest"
        )
    return 0


def export(options, roots: list[str]) -> int:
    """The `export` command: finds the run (or, under --results-dir, the study), then writes it through MLflow."""
    uri = options.tracking_uri or f"sqlite:///{pathlib.Path(env_vars.working_directory(), DEFAULT_STORE).resolve()}"
    header = {"tracking_uri": uri}
    study_folder = find_study(pathlib.Path(options.results_dir), options.id) if options.results_dir else None
    if study_folder is not None:
        name, tags, runs = _of_study(study_folder, pathlib.Path(options.results_dir), options.artifacts_dir)
        header.update(experiment=name, experiment_tags=tags)
    else:
        try:
            run = finder.find_run(options.id, roots)
        except finder.RunNotFound as error:
            raise UsageError(f"{error}; a study is found under the --results-dir it was run with") from None
        header.update(experiment=run.manifest.experiment.module or run.run_id, experiment_tags={})
        runs = iter([_of_run(run, options.artifacts_dir)])
    python = _python(options.python)  # once the run or study is found: a typo in its id is said first
    print(f"exporting {options.id} to MLflow: experiment {header['experiment']!r} in {uri}", flush=True)
    return _write(python, header, runs)
