"""Slow: a Tune run (two seeds of PPO on CartPole-v1) with a store mirrors its Tune storage, trial checkpoints
included, to a real S3-compatible server (moto's); stopped with SIGTERM, it resumes in a fresh folder with nothing
of it, from the store alone. The same on a two-node loopback cluster whose worker has a disk of its own: the
checkpoints of the trial that ran there reach the store too."""

import json
import signal

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import loopback_cluster, run_helpers, s3_server

ITERATIONS = 4


def _roots(folder):
    return ["--results-dir", folder / "r", "--artifacts-dir", folder / "a"]


def _environment(server):
    return {
        **server.store_env(),
        env_vars.MIRROR_INTERVAL_ENV: "0.5",
        "PPO_RECIPE_RUNNER": "tune",
        "PPO_RECIPE_ITERATIONS": ITERATIONS,
    }


def _stopped_at_each_trials_first_result(lost, environment, *arguments) -> dict:
    """Run `first` in `lost`, stopped with SIGTERM once each trial reported; its manifest, once it checked that the
    store's index lists every file of every checkpoint the manifest names."""
    status, stderr = run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "first", "--upload-artifacts", *arguments, *_roots(lost)],
        lambda: len({row["trial_id"] for row in run_helpers.metrics_rows(lost / "a")}) == 2,
        signal.SIGTERM,
        "each trial's first result",
        **environment,
    )
    assert status == 128 + signal.SIGTERM, stderr[-3000:]
    first = run_helpers.manifest(lost / "r" / "first")
    assert first["status"] == "interrupted" and first["checkpoints"], first["checkpoints"]
    index = json.loads((lost / "r" / "first" / records.REMOTE_ARTIFACTS_FILE).read_text())
    assert index["status"] == "complete" and not index["not_uploaded"]
    in_store = {entry["local"] for entry in index["files"]}
    run = lost / "a" / "first"
    for checkpoint in first["checkpoints"]:  # Tune's, saved by its trials into artifacts/first/tune/
        files = {f"artifacts/{path.relative_to(run).as_posix()}" for path in (run / checkpoint["path"]).rglob("*")}
        assert files and {name for name in files if (run / name.split("/", 1)[1]).is_file()} <= in_store
    return first


def _resumed_in_a_fresh_folder(clone, environment, first) -> list[dict]:
    """`first` resumed as `second` in `clone` (another machine: nothing of the run) until it completes; its trials."""
    status, _, stderr = run_helpers.run_cli(
        [run_helpers.PPO, "--run-id", "second", "--resume-from", "first", "--no-upload-artifacts", *_roots(clone)],
        timeout=300,
        **environment,
    )
    assert status == 0, stderr[-3000:]
    assert "the Tune storage of run first is not on this machine: fetched it from the store" in stderr
    second = run_helpers.manifest(clone / "r" / "second")
    assert second["status"] == "completed" and second["parent_run"]["parent_run_id"] == "first"
    trials = json.loads((clone / "r" / "second" / records.SUMMARY_FILE).read_text())["trials"]
    assert len(trials) == 2
    for trial in trials:
        assert (trial["status"], trial["training_iteration"]) == ("finished", ITERATIONS)
    checkpointed = {}
    for entry in first["checkpoints"]:
        checkpointed[entry["trial_id"]] = max(checkpointed.get(entry["trial_id"], 0), entry["iteration"])
    for row in run_helpers.metrics_rows(clone / "a" / "second"):  # each trial continues from its checkpoint
        assert row["training_iteration"] > checkpointed.get(row["trial_id"], 0), row["trial_id"]
    return trials


def test_a_tune_runs_checkpoints_reach_the_store_and_it_resumes_from_there_in_a_fresh_folder(tmp_path):
    with s3_server.S3Server() as server:
        environment = _environment(server)
        first = _stopped_at_each_trials_first_result(tmp_path / "lost", environment)
        _resumed_in_a_fresh_folder(tmp_path / "clone", environment, first)


def test_trials_on_two_nodes_that_share_no_disk_reach_the_store_and_resume_from_it(tmp_path):
    lost, worker_disk = tmp_path / "lost", tmp_path / "worker-disk"
    (lost / "a").mkdir(parents=True)
    worker_disk.mkdir()
    with s3_server.S3Server() as server:
        environment = _environment(server)
        # One CPU on each node and local sampling: each trial fits one node only.
        with loopback_cluster.running(head_cpus=1, worker_cpus=[1], disks=[{lost / "a": worker_disk}]) as cluster:
            first = _stopped_at_each_trials_first_result(lost, environment, "--ray-address", cluster.address)
            nodes = (cluster.head_id, cluster.worker_ids[0])
        rows = run_helpers.metrics_rows(lost / "a" / "first")
        assert {row["node_id"] for row in rows} == set(nodes)
        on_worker = {row["trial_id"] for row in rows if row["node_id"] == nodes[1]}
        saved_there = [entry for entry in first["checkpoints"] if entry["trial_id"] in on_worker]
        assert saved_there, first["checkpoints"]
        for entry in saved_there:  # saved on the worker's own disk, which the driver does not see
            assert (worker_disk / "first" / entry["path"]).is_dir(), entry
        assert {entry["trial_id"] for entry in first["checkpoints"]} == {row["trial_id"] for row in rows}
        _resumed_in_a_fresh_folder(tmp_path / "clone", environment, first)
