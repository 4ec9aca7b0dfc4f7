"""Slow: a Tune run (two seeds of PPO on CartPole-v1) with a store mirrors its Tune storage, trial checkpoints
included, to a real S3-compatible server (moto's); stopped with SIGTERM, it resumes in a fresh folder with nothing
of it, from the store alone."""

import json
import signal

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import run_helpers, s3_server

ITERATIONS = 4


def _roots(folder):
    return ["--results-dir", folder / "r", "--artifacts-dir", folder / "a"]


def test_a_tune_runs_checkpoints_reach_the_store_and_it_resumes_from_there_in_a_fresh_folder(tmp_path):
    with s3_server.S3Server() as server:
        environment = {
            **server.store_env(),
            env_vars.MIRROR_INTERVAL_ENV: "0.5",
            "PPO_RECIPE_RUNNER": "tune",
            "PPO_RECIPE_ITERATIONS": ITERATIONS,
        }
        lost = tmp_path / "lost"
        status, stderr = run_helpers.run_until(
            [run_helpers.PPO, "--run-id", "first", "--upload-artifacts", *_roots(lost)],
            lambda: run_helpers.metrics_rows(lost / "a"),
            signal.SIGTERM,
            "the first result",
            **environment,
        )
        assert status == 128 + signal.SIGTERM, stderr[-3000:]
        first = run_helpers.manifest(lost / "r" / "first")
        assert first["status"] == "interrupted" and first["checkpoints"], first["checkpoints"]
        index = json.loads((lost / "r" / "first" / records.REMOTE_ARTIFACTS_FILE).read_text())
        assert index["status"] == "complete" and not index["not_uploaded"]
        in_store = {entry["local"] for entry in index["files"]}
        for checkpoint in first["checkpoints"]:  # Tune's, saved by its trials into artifacts/first/tune/
            run = lost / "a" / "first"
            files = {f"artifacts/{path.relative_to(run).as_posix()}" for path in (run / checkpoint["path"]).rglob("*")}
            assert files and {name for name in files if (run / name.split("/", 1)[1]).is_file()} <= in_store

        clone = tmp_path / "clone"  # another machine: nothing of the run
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
    for row in run_helpers.metrics_rows(
        clone / "a" / "second"
    ):  # each trial continues from its checkpoint in the store
        assert row["training_iteration"] > checkpointed.get(row["trial_id"], 0), row["trial_id"]
