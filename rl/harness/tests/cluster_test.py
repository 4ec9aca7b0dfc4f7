"""Slow: real runs on a multi-node Ray cluster on loopback (tests/loopback_cluster.py).

Env runners placed on a worker node, Tune trials spread over nodes, the loss of a worker node
mid-run, the cluster's provenance in the manifest, and a wrong address refused in time.
"""

import itertools
import json
import signal
import socket
import time

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import loopback_cluster, run_helpers
from rl.harness.training import cluster as harness_cluster


def _roots(tmp_path):
    return ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]


def test_a_direct_run_samples_on_the_worker_node_and_records_the_cluster(tmp_path):
    # The head has no CPU, so Ray can place the env runners (one CPU each) only on the worker.
    with loopback_cluster.running(head_cpus=0, worker_cpus=[3]) as cluster:
        status, _, stderr = run_helpers.run_cli(
            [run_helpers.PPO, "--smoke", "--run-id", "direct", "--ray-address", cluster.address, *_roots(tmp_path)],
            timeout=240,
        )
    assert status == 0, stderr[-3000:]
    manifest = run_helpers.manifest(tmp_path / "r" / "smoke" / "direct")
    assert manifest["status"] == "completed"
    sampling = manifest["runner"]["sampling"]
    # The cluster's 3 CPUs place the 16 envs on 2 remote runners (CPUs - 1), as on one 3-CPU machine.
    assert (sampling["placement"], sampling["num_env_runners"], sampling["num_envs_per_env_runner"]) == ("remote", 2, 8)
    facts = manifest["cluster"]
    assert facts["env_runner_nodes"] == [cluster.worker_ids[0]] * 2
    assert facts["driver_node_id"] == cluster.head_id
    assert (facts["address"], facts["node_count"]) == (cluster.address, 2)
    nodes = {node["node_id"]: node for node in facts["nodes"]}
    assert set(nodes) == {cluster.head_id, *cluster.worker_ids}
    head, worker = nodes[cluster.head_id], nodes[cluster.worker_ids[0]]
    assert (head["name"], head["head"], head["resources"].get("CPU")) == ("head", True, None)
    assert (worker["name"], worker["head"]) == ("worker-1", False)
    assert worker["resources"]["CPU"] == 3.0 and worker["resources"][loopback_cluster.WORKER_RESOURCE] == 1.0
    driver = harness_cluster.driver_versions()
    assert all((node["ray"], node["python"]) == (driver["ray"], driver["python"]) for node in nodes.values())
    assert len(run_helpers.metrics_rows(tmp_path / "a" / "smoke" / "direct")) == 2


def test_a_tune_run_spreads_its_two_trials_over_the_nodes(tmp_path):
    # One CPU on each node and local sampling (2 CPUs in all): each trial fits one node only.
    with loopback_cluster.running(head_cpus=1, worker_cpus=[1]) as cluster:
        status, _, stderr = run_helpers.run_cli(
            [run_helpers.PPO, "--run-id", "tune", "--ray-address", cluster.address, *_roots(tmp_path)],
            timeout=300,
            PPO_RECIPE_RUNNER="tune",
            PPO_RECIPE_ITERATIONS=2,
        )
    assert status == 0, stderr[-3000:]
    trials = json.loads((tmp_path / "r" / "tune" / records.SUMMARY_FILE).read_text())["trials"]
    assert [trial["status"] for trial in trials] == ["finished", "finished"]
    assert {trial["node_id"] for trial in trials} == {cluster.head_id, cluster.worker_ids[0]}
    rows = run_helpers.metrics_rows(tmp_path / "a" / "tune")
    assert {row["node_id"] for row in rows} == {cluster.head_id, cluster.worker_ids[0]}  # per row, too


def test_losing_a_worker_node_mid_run_keeps_every_record_and_the_run_completes(tmp_path):
    # A budget in env steps, not iterations: iterations whose runners are being restarted sample
    # nothing and would otherwise use up an iteration budget before RLlib's restarted runners are up.
    env_steps = 3200  # about 8 iterations of 400
    results, artifacts = tmp_path / "r" / "lossy", tmp_path / "a" / "lossy"
    with loopback_cluster.running(head_cpus=0, worker_cpus=[2, 2]) as cluster:
        process = run_helpers.start_cli(
            [run_helpers.PPO, "--run-id", "lossy", "--ray-address", cluster.address, *_roots(tmp_path)],
            PPO_RECIPE_ENV_STEPS=env_steps,
        )
        try:

            def checkpointed():  # the first checkpoint is in place and the runners' nodes are known
                return (
                    (results / records.MANIFEST_FILE).exists()
                    and run_helpers.manifest(results)["checkpoints"]
                    and run_helpers.manifest(results)
                )

            before = run_helpers.wait_for(checkpointed, 240, "the first checkpoint")
            rows_before = run_helpers.metrics_rows(artifacts)
            lost = before["cluster"]["env_runner_nodes"][0]
            cluster.kill(lost)
            killed_at = time.monotonic()
            _, stderr = process.communicate(timeout=300)
        finally:
            run_helpers.stop_group(process)
        after = run_helpers.manifest(results)
        if after["status"] != "completed":  # RLlib gave up on the lost runners: resume on what is left
            assert after["status"] in ("failed", "interrupted"), stderr[-3000:]
            status, _, stderr = run_helpers.run_cli(
                [
                    run_helpers.PPO,
                    "--run-id",
                    "resumed",
                    "--resume-from",
                    "lossy",
                    "--ray-address",
                    cluster.address,
                    *_roots(tmp_path),
                ],
                timeout=300,
                PPO_RECIPE_ENV_STEPS=env_steps,
            )
            assert status == 0, stderr[-3000:]
    assert process.returncode in (0, 1, 128 + signal.SIGTERM), stderr[-3000:]
    rows = run_helpers.metrics_rows(artifacts)
    assert rows[: len(rows_before)] == rows_before  # nothing written before the loss is lost
    for checkpoint in before["checkpoints"]:
        assert (artifacts / checkpoint["path"] / "rllib_checkpoint.json").exists()
    if after["status"] != "completed":
        rows += run_helpers.metrics_rows(tmp_path / "a" / "resumed")
    assert [row["training_iteration"] for row in rows] == list(range(1, len(rows) + 1)), stderr[-3000:]
    # The env-step counter never goes back; an iteration during which the runners' node died may
    # sample nothing (RLlib then repeats the count), so it grows overall, to the budget.
    steps = [row["num_env_steps_sampled_lifetime"] for row in rows]
    assert all(later >= earlier for earlier, later in itertools.pairwise(steps)), steps
    assert steps[-1] >= env_steps > steps[len(rows_before) - 1], steps
    print(f"node {lost[:8]} lost; run {after['status']} {time.monotonic() - killed_at:.0f} s later")


def test_without_ray_address_a_run_starts_its_own_ray_whatever_cluster_is_around(tmp_path):
    # A bare ray.init() joins the cluster $RAY_ADDRESS or /tmp/ray/ray_current_cluster names (this one).
    with loopback_cluster.running(head_cpus=0, worker_cpus=[1]) as cluster:
        status, _, stderr = run_helpers.run_cli(
            [run_helpers.PPO, "--smoke", "--run-id", "own", *_roots(tmp_path)], timeout=240, RAY_ADDRESS=cluster.address
        )
    assert status == 0, stderr[-3000:]
    facts = run_helpers.manifest(tmp_path / "r" / "smoke" / "own")["cluster"]
    assert (facts["address"], facts["node_count"]) == (None, 1)
    assert facts["nodes"][0]["node_id"] not in {cluster.head_id, *cluster.worker_ids}


def test_an_address_where_no_ray_cluster_answers_fails_in_time_with_one_line(tmp_path):
    # Something accepts connections there, but it is no Ray GCS: ray.init would block for 60 s.
    with socket.create_server(("127.0.0.1", 0)) as impostor:
        address = f"127.0.0.1:{impostor.getsockname()[1]}"
        started = time.monotonic()
        status, _, stderr = run_helpers.run_cli(
            [run_helpers.PPO, "--ray-address", address, *_roots(tmp_path)],
            timeout=60,
            **{env_vars.RAY_CONNECT_TIMEOUT_ENV: 5},
        )
        elapsed = time.monotonic() - started
    assert status == 2 and elapsed < 30, (status, elapsed, stderr[-3000:])
    line = stderr.strip().splitlines()[-1]
    assert address in line and "no Ray cluster answered within 5 s" in line and "ray start --head" in line, stderr
    assert not (tmp_path / "r").exists()  # refused before any record
