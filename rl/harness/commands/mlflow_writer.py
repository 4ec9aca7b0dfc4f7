"""Writes what `export.py` streams into an MLflow tracking store with MLflow's own client.

    python mlflow_writer.py < export.jsonl     # run by `rl-harness export --to mlflow` with its --python

It runs in a python that has MLflow, not the harness's venv, so it imports the standard library
and MLflow only. Its input, one JSON document a line: first `{"tracking_uri", "experiment",
"experiment_tags"}`, then one MLflow run each (`name`, `start_ms`, `end_ms`, `status`, `params`,
`tags`, `metrics` as [key, value, timestamp ms, step]). A run whose `rl_harness.run_id` the
experiment holds already, whole, is left as it is; one left part-written is written again. Exit 2 with one line on stderr when this python has no
MLflow (or the store's client is missing), 1 on any other failure, after the runs written so far.
"""

import json
import logging
import os
import sys

METRICS_BATCH, PARAMS_BATCH = 1000, 100  # the most MLflow's log_batch takes in one call
RUN_ID_TAG = "rl_harness.run_id"
DONE_TAG = "rl_harness.exported"  # set last: a run without it was left part-written


def _chunks(items, size):
    return [items[start : start + size] for start in range(0, len(items), size)]


def _artifact_location(uri):
    """Beside a SQLite store, `mlartifacts/` (MLflow's server default); elsewhere the store's own default."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    return "file://" + os.path.join(os.path.dirname(os.path.abspath(uri[len(prefix) :])), "mlartifacts")


def _experiment(client, header):
    found = client.get_experiment_by_name(header["experiment"])
    if found is not None:
        return found.experiment_id
    return client.create_experiment(
        header["experiment"],
        artifact_location=_artifact_location(header["tracking_uri"]),
        tags=header.get("experiment_tags") or {},
    )


def _write_run(client, entities, experiment_id, run):
    """One run, marked `rl_harness.exported` once whole; a run left part-written (a killed export) is replaced."""
    for found in client.search_runs(
        [experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run['tags'][RUN_ID_TAG]}'"
    ):
        if found.data.tags.get(DONE_TAG) == "true":
            print(f"{run['name']}: in the experiment already (MLflow run {found.info.run_id}), left as it is")
            return
        client.delete_run(found.info.run_id)
    identifier = client.create_run(
        experiment_id, start_time=run["start_ms"], tags=run["tags"], run_name=run["name"]
    ).info.run_id
    params = [entities.Param(key, value) for key, value in run["params"].items()]
    metrics = [entities.Metric(key, value, timestamp, step) for key, value, timestamp, step in run["metrics"]]
    for chunk in _chunks(params, PARAMS_BATCH):
        client.log_batch(identifier, params=chunk)
    for chunk in _chunks(metrics, METRICS_BATCH):
        client.log_batch(identifier, metrics=chunk)
    client.set_terminated(identifier, status=run["status"], end_time=run["end_ms"])
    client.set_tag(identifier, DONE_TAG, "true")
    print(f"{run['name']}: MLflow run {identifier}, {len(params)} params, {len(metrics)} metric values", flush=True)


def main():
    try:
        import mlflow
        from mlflow import entities
        from mlflow.tracking import MlflowClient
    except ImportError as error:
        print(f"this python has no MLflow ({error})", file=sys.stderr)
        return 2
    for name in ("mlflow", "alembic"):  # their start-up logs would hide the one line that matters
        logging.getLogger(name).setLevel(logging.WARNING)
    header = json.loads(sys.stdin.readline())
    try:
        client = MlflowClient(header["tracking_uri"])
        experiment_id = _experiment(client, header)
    except (mlflow.exceptions.MlflowException, ImportError) as error:  # a store whose client is not installed
        print(f"MLflow cannot open {header['tracking_uri']}: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    for line in sys.stdin:
        _write_run(client, entities, experiment_id, json.loads(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
