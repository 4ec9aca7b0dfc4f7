"""Slow: a real direct RLlib run (PPO on CartPole-v1, smoke budget) through the CLI."""

import json
import os
import re

from rl.harness.run import records, seeding
from rl.harness.tests import mounts, run_helpers
from rl.harness.training import ray_folders


def test_a_direct_run_trains_checkpoints_and_records(tmp_path):
    args = [
        run_helpers.PPO,
        "--smoke",
        "--run-id",
        "direct",
        "--seed",
        "3",
        "--results-dir",
        tmp_path / "r",
        "--artifacts-dir",
        tmp_path / "a",
    ]
    status, _, stderr = run_helpers.run_cli(args, timeout=240)
    assert status == 0, stderr[-3000:]
    results, artifacts = tmp_path / "r" / "smoke" / "direct", tmp_path / "a" / "smoke" / "direct"
    manifest = run_helpers.manifest(results)
    assert manifest["status"] == "completed"
    assert manifest["runner"]["kind"] == "direct" and manifest["runner"]["algorithm"] == "PPO"
    assert manifest["runner"]["rllib_seed"] == seeding.SeedStreams(3).integer("rllib")
    assert manifest["seed_streams"]["rllib"]["value"] == manifest["runner"]["rllib_seed"]

    rows = records.read_json_lines(str(artifacts / records.METRICS_FILE))
    assert [row["training_iteration"] for row in rows] == [1, 2]
    steps = [row["num_env_steps_sampled_lifetime"] for row in rows]
    assert 400 <= steps[0] < steps[1]  # train_batch_size_per_learner=400 per iteration
    assert all(row["env_runners/episode_return_mean"] > 0 for row in rows)
    for iteration in (1, 2):  # one progress line per iteration
        assert re.search(
            rf"iter {iteration} \| \d+% \| ETA \d+ s \| env steps \d+ \| return [\d.]+"
            rf" \| \d+ env steps/s \| [\d.]+ s/iter",
            stderr,
        )

    assert [c["iteration"] for c in manifest["checkpoints"]] == [2]  # every 2 iterations; the last is final
    checkpoint = artifacts / manifest["checkpoints"][0]["path"]
    assert (checkpoint / "rllib_checkpoint.json").exists()
    state = json.loads((checkpoint / records.CHECKPOINT_STATE_FILE).read_text())
    assert (state["iteration"], state["env_steps"], state["run_id"]) == (2, steps[1], "direct")
    summary = json.loads((results / records.SUMMARY_FILE).read_text())
    assert summary["metrics"]["env_runners/episode_return_mean"]["points"] == 2
    assert summary["outcome"]["training_iteration"] == 2


def test_a_direct_run_with_a_read_only_home_completes_and_writes_nothing_there(tmp_path):
    home = tmp_path / "home"
    with mounts.read_only(home):  # Ray's default ~/ray_results cannot be made
        status, _, stderr = run_helpers.run_cli(
            [
                run_helpers.PPO,
                "--smoke",
                "--run-id",
                "home",
                "--results-dir",
                tmp_path / "r",
                "--artifacts-dir",
                tmp_path / "a",
            ],
            timeout=240,
            HOME=home,
        )
        assert status == 0 and "Traceback" not in stderr, stderr[-3000:]
        assert os.listdir(home) == []
    assert os.listdir(tmp_path / "a" / "smoke" / "home" / ray_folders.RAY_LOGS)  # the Algorithm's log folder
