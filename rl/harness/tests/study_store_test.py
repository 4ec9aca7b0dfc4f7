"""A study whose home is the store (moto's S3 server, started here): its driver killed with SIGKILL mid-study and
its machine's folders deleted, then `study --resume` from a fresh clone with no results or artifacts completes it
from the store alone, and `fetch <study-id>` brings the whole study back; a study on a two-node loopback cluster
whose nodes have folders (and HOMEs) of their own, summarised from the store (slow: starts Ray)."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.study import summary
from rl.harness.tests import loopback_cluster, run_helpers, s3_server

STUDY = "rl.harness.tests.fake_study"
ITERATIONS = 12
_REPOSITORY = pathlib.Path(os.path.realpath(__file__)).parents[3]  # rl/harness/tests/<this file>


@pytest.fixture(scope="module")
def server():
    with s3_server.S3Server() as running:
        yield running


def _clone(tmp_path, name, commit="HEAD"):
    """A fresh clone of this repository at `commit`: what another machine checks out."""
    folder = tmp_path / name
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(_REPOSITORY), str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "checkout", "--quiet", commit], check=True)
    return folder


def _knobs(server, clone):
    return {
        **server.store_env("lab"),
        env_vars.MIRROR_INTERVAL_ENV: 0.5,
        env_vars.MIRROR_DRAIN_ENV: 60,
        "PYTHONPATH": clone,
        "FAKE_RECIPE_ITERATIONS": ITERATIONS,
        "FAKE_RECIPE_SLEEP_S": 0.5,
    }


def _roots(clone):
    return ["--results-dir", clone / "results", "--artifacts-dir", clone / "artifacts"]


def _record(clone, study_id):
    path = clone / "results" / "studies" / study_id / "study.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _indexed(server, run_id) -> set[str]:
    """The files the store's index of run `run_id` lists (none before it has one)."""
    index = f"{server.bucket}/lab/{run_helpers.FAKE}/{run_id}/results/{records.REMOTE_ARTIFACTS_FILE}"
    try:
        with s3_server.reader(server).open_input_stream(index) as stream:
            return {entry["local"] for entry in json.loads(stream.read())["files"]}
    except (OSError, ValueError):
        return set()


def _checkpoint_in_store(server, run_id):
    """Whether the store's index of run `run_id` lists a checkpoint and the run's manifest."""
    indexed = _indexed(server, run_id)
    return f"results/{records.MANIFEST_FILE}" in indexed and any(
        local.startswith(f"artifacts/{records.CHECKPOINTS_DIR}/") for local in indexed
    )


@pytest.mark.slow
def test_a_study_whose_driver_was_killed_resumes_from_the_store_alone_in_a_fresh_clone(server, tmp_path):
    lost = _clone(tmp_path, "lost")
    process = run_helpers.start_cli(
        ["study", STUDY, "--study-id", "homeless", *_roots(lost)], cwd=lost, **_knobs(server, lost)
    )
    midway = {}
    try:

        def one_finished_one_midway():  # midway: a checkpoint of it in the store, far from its end
            members = (_record(lost, "homeless") or {}).get("members", [])
            for member in members:
                if (
                    member["status"] == "running"
                    and _checkpoint_in_store(server, member["runs"][-1])
                    and len(records.read_run_rows(lost / "artifacts" / member["runs"][-1])) <= ITERATIONS // 2
                ):
                    midway.update(member)
            return "completed" in [member["status"] for member in members] and midway

        run_helpers.wait_for(one_finished_one_midway, 240, "a finished member and one midway")
        run_helpers.kill_with_descendants(
            process, 90, "every process of the killed study to end (the members drain to the store)"
        )
    finally:
        run_helpers.stop_group(process)
    started = _record(lost, "homeless")
    assert started["code"]["library"]["root"] == os.path.realpath(lost)  # the clone's code ran, not this checkout's
    before = {(member["agent"], member["seed"]): member for member in started["members"]}
    shutil.rmtree(lost)  # the machine is gone: only the store holds the study

    fresh = _clone(tmp_path, "fresh", started["code"]["library"]["commit"])  # at the study's commit
    code, stdout, stderr = run_helpers.run_cli(
        ["study", STUDY, "--resume", "homeless", *_roots(fresh)], timeout=300, cwd=fresh, **_knobs(server, fresh)
    )
    logs = sorted((fresh / "artifacts" / "studies" / "homeless" / "logs").glob("*.log"))
    assert code == 0, (stdout + stderr)[-3000:] + "".join(log.read_text()[-1500:] for log in logs)
    assert "study homeless is not on this machine: fetched its record" in stderr
    record = _record(fresh, "homeless")
    assert record["status"] == "completed" and {member["status"] for member in record["members"]} == {"completed"}
    for member in record["members"]:
        if before[(member["agent"], member["seed"])]["status"] == "completed":
            assert member["runs"] == before[(member["agent"], member["seed"])]["runs"]  # not run again
    resumed = next(
        member for member in record["members"] if (member["agent"], member["seed"]) == (midway["agent"], midway["seed"])
    )
    if resumed["runs"] != midway["runs"]:  # unless it completed as it was stopped: continued from its checkpoint
        assert resumed["runs"][:-1] == midway["runs"]
        manifest = json.loads((fresh / "results" / resumed["runs"][-1] / records.MANIFEST_FILE).read_text())
        assert manifest["parent_run"]["parent_run_id"] == midway["runs"][-1]

    # Every member's curve, fetched from the store into a third folder, holds each iteration's row once.
    elsewhere = tmp_path / "elsewhere"
    code, stdout, stderr = run_helpers.run_cli(
        ["fetch", "homeless", *_roots(elsewhere)], cwd=fresh, **_knobs(server, fresh)
    )
    assert code == 0, stderr[-3000:]
    assert "study homeless:" in stdout and "member runs fetched and verified by sha256" in stdout
    found = json.loads((elsewhere / "results" / "studies" / "homeless" / summary.SUMMARY_JSON).read_text())
    assert found == json.loads((fresh / "results" / "studies" / "homeless" / summary.SUMMARY_JSON).read_text())
    assert (found["members"], found["completed"]) == (4, 4)
    assert found["without_curve"] == []  # the driver drew every member's curve from the store's metrics
    for member in record["members"]:
        rows = records.read_run_rows(elsewhere / "artifacts" / member["runs"][-1])  # its lineage's, then its own
        assert [row["training_iteration"] for row in rows] == list(range(1, ITERATIONS + 1)), member
        scores = found["agents"][member["agent"]]["scores"]
        assert scores["iterations"]["values"][str(member["seed"])] == ITERATIONS
        assert scores["last loss"]["values"][str(member["seed"])] == pytest.approx(rows[-1]["fake/loss"])


def _node_environment(server, folder, knobs):
    """A loopback node's own folders (HOME, $RL_HARNESS_NODE_FOLDER) and the store's key, as `ray start` on a machine
    of its own would have them, with the fake recipe's `knobs`."""
    (folder / "home").mkdir(parents=True)
    knobs = {
        name: str(value)
        for name, value in {**_knobs(server, str(_REPOSITORY)), **knobs}.items()
        if name != "PYTHONPATH"
    }
    return {**knobs, "HOME": str(folder / "home"), env_vars.NODE_FOLDER_ENV: str(folder)}


def _two_nodes(server, tmp_path, **knobs):
    """A head and a worker of one CPU each, with folders of their own."""
    nodes = [tmp_path / "head", tmp_path / "worker"]
    return nodes, loopback_cluster.running(
        head_cpus=1, worker_cpus=[1], environments=[_node_environment(server, node, knobs) for node in nodes]
    )


def _study_on(cluster, driver, server, *arguments):
    """The study command's arguments and environment on `cluster`, from `driver`'s folders and HOME."""
    return (
        (["study", STUDY, *arguments, *_roots(driver), "--ray-address", cluster.address]),
        {**_knobs(server, ":".join(sys.path)), "HOME": driver},
    )


@pytest.mark.slow
def test_a_study_on_two_nodes_that_share_only_the_store_is_summarised_from_the_store(server, tmp_path):
    nodes, cluster_running = _two_nodes(server, tmp_path)
    driver = tmp_path / "driver"
    with cluster_running as cluster:
        arguments, environment = _study_on(cluster, driver, server, "--study-id", "spread")
        code, stdout, stderr = run_helpers.run_cli(arguments, timeout=300, cwd=_REPOSITORY, **environment)
    logs = sorted(str(log) for node in nodes for log in node.rglob("*.log"))
    assert code == 0, (stdout + stderr)[-3000:] + "".join(pathlib.Path(log).read_text()[-1500:] for log in logs)
    record = _record(driver, "spread")
    assert record["status"] == "completed" and {member["status"] for member in record["members"]} == {"completed"}
    ran = {node.name: {folder.name for folder in (node / "results").iterdir() if folder.is_dir()} for node in nodes}
    run_ids = {member["runs"][-1] for member in record["members"]}
    assert set().union(*ran.values()) == run_ids and all(ran.values()), ran  # each node ran members, in its folders
    # The driver's folders hold the study's own files, never a member's records or metrics: it read them from the store.
    assert [path.name for path in (driver / "results").iterdir() if path.is_dir()] == ["studies"]
    # (Tune's own folder of each trial, its exit status, is the study's: artifacts/studies/<study-id>/tune-<n>/.)
    member_files = (records.MANIFEST_FILE, records.METRICS_FILE)
    assert not [path for path in driver.rglob("*") if path.name in member_files]
    assert not [run_id for run_id in run_ids for root in ("results", "artifacts") if (driver / root / run_id).exists()]
    found = json.loads((driver / "results" / "studies" / "spread" / summary.SUMMARY_JSON).read_text())
    assert (found["members"], found["completed"], found["without_curve"]) == (4, 4, [])
    for member in record["members"]:
        node = next(node for node in nodes if member["runs"][-1] in ran[node.name])
        rows = records.read_run_rows(node / "artifacts" / member["runs"][-1])  # on the node that ran it
        assert [row["training_iteration"] for row in rows] == list(range(1, ITERATIONS + 1)), member
        scores = found["agents"][member["agent"]]["scores"]
        assert scores["last loss"]["values"][str(member["seed"])] == pytest.approx(rows[-1]["fake/loss"])


LONGER = 20  # iterations of the member lost with its node, one checkpoint each: a tenth of it is 2


@pytest.mark.slow
def test_a_member_whose_node_was_killed_continues_on_the_other_node_within_the_same_study(server, tmp_path):
    (head, worker), cluster_running = _two_nodes(
        server, tmp_path, FAKE_RECIPE_ITERATIONS=LONGER, FAKE_RECIPE_CHECKPOINT_EVERY=1
    )
    driver = tmp_path / "driver"
    with cluster_running as cluster:
        arguments, environment = _study_on(cluster, driver, server, "--study-id", "lossy")
        process = run_helpers.start_cli(arguments, cwd=_REPOSITORY, **environment)
        try:

            def midway_on_the_worker():  # a run on the worker with a checkpoint in the store, far from its end
                for run in (worker / "results").glob("lossy-*"):
                    if (
                        _checkpoint_in_store(server, run.name)
                        and len(records.read_run_rows(worker / "artifacts" / run.name)) <= LONGER // 2
                    ):
                        return run.name
                return None

            lost = run_helpers.wait_for(midway_on_the_worker, 240, "a member midway on the worker")
            # The machine is gone: its member's run with it (no chance to checkpoint), then the node's Ray.
            for pid in loopback_cluster.processes_naming(str(worker)):
                os.kill(pid, signal.SIGKILL)
            trained = len(records.read_run_rows(worker / "artifacts" / lost))
            cluster.kill(cluster.worker_ids[0])
            stdout, stderr = process.communicate(timeout=300)  # no `study --resume`: the same command goes on
        finally:
            run_helpers.stop_group(process)
    logs = "".join(log.read_text()[-1500:] for log in sorted(head.rglob("*.log")))
    assert process.returncode == 0, (stdout + stderr)[-3000:] + logs
    record = _record(driver, "lossy")
    assert record["status"] == "completed" and {member["status"] for member in record["members"]} == {"completed"}
    member = next(member for member in record["members"] if lost in member["runs"])
    assert member["runs"][-2] == lost
    child = member["runs"][-1]
    # Each attempt's log, written on its node, reached the store with its run.
    assert all(f"artifacts/{records.MEMBER_LOG_FILE}" in _indexed(server, run_id) for run_id in (lost, child))
    manifest = json.loads((head / "results" / child / records.MANIFEST_FILE).read_text())  # it ran on the head
    assert manifest["parent_run"]["parent_run_id"] == lost
    own = records.read_json_lines(head / "artifacts" / child / records.METRICS_FILE)
    redone = trained - (own[0]["training_iteration"] - 1)  # from the lost run's newest checkpoint in the store
    assert 0 <= redone <= LONGER // 10, (trained, own[0]["training_iteration"])
    rows = records.read_run_rows(head / "artifacts" / child)  # the lost run's rows to its checkpoint, then its own
    assert [row["training_iteration"] for row in rows] == list(range(1, LONGER + 1))
    found = json.loads((driver / "results" / "studies" / "lossy" / summary.SUMMARY_JSON).read_text())
    assert (found["members"], found["completed"], found["without_curve"]) == (4, 4, [])
    assert found["agents"][member["agent"]]["scores"]["iterations"]["values"][str(member["seed"])] == LONGER
