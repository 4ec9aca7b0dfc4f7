"""The study command end to end on Ray Tune (slow: starts Ray): parallel trials, a failed member, SIGTERM or SIGKILL
and resume."""

import hashlib
import json
import os
import re
import shlex
import signal
import time

from rl.harness.run import records
from rl.harness.run.status import parse_time
from rl.harness.study import summary
from rl.harness.study.record import StudyRecord
from rl.harness.tests import loopback_cluster, run_helpers

STUDY = "rl.harness.tests.fake_study"
STAGED_STUDY = "rl.harness.tests.staged_study"


def _args(tmp_path, *more):
    return ["study", STUDY, "--results-dir", tmp_path / "results", "--artifacts-dir", tmp_path / "artifacts", *more]


def _record(tmp_path, study_id):
    path = tmp_path / "results" / "studies" / study_id / "study.json"
    return json.loads(path.read_text()) if path.exists() else None


def _members(record):
    return {(member["agent"], member["seed"]): member for member in record["members"]}


def test_trials_run_at_once_and_a_failed_member_is_recorded_and_named(tmp_path):
    code, stdout, stderr = run_helpers.run_cli(
        _args(tmp_path, "--study-id", "par"),
        timeout=240,
        FAKE_RECIPE_ITERATIONS=6,
        FAKE_RECIPE_SLEEP_S=0.5,
        FAKE_RECIPE_FAIL_AT=2,
        FAKE_RECIPE_FAIL_SEED=1,
    )
    assert code == 1, stderr[-3000:]
    members = _members(_record(tmp_path, "par"))
    spans = [
        (parse_time(members[(agent, 0)]["started_at"]), parse_time(members[(agent, 0)]["ended_at"]))
        for agent in ("first", "second")
    ]  # the first two members (seed by seed, then agent by agent)
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans  # the two runs overlapped in time
    outcome = json.loads((tmp_path / "results" / members[("first", 0)]["runs"][0] / "summary.json").read_text())
    assert outcome["outcome"]["niceness"] == os.getpriority(os.PRIO_PROCESS, 0)  # not Ray's worker niceness 15
    assert members[("first", 1)]["status"] == "failed"
    assert "fake failure at iteration 2" in members[("first", 1)]["error"]
    found = json.loads((tmp_path / "results" / "studies" / "par" / summary.SUMMARY_JSON).read_text())
    assert [entry["member"] for entry in found["not_completed"]] == ["first/seed 1", "second/seed 1"]
    assert "first/seed 1: failed" in stdout and "2 member(s) not completed" in stderr
    # The terminal leads with the members' events; each member's own output is in its log, whose path is printed.
    logs = tmp_path / "artifacts" / "studies" / "par" / "logs"
    lines = stdout.splitlines()
    events = lines[: next(index for index, line in enumerate(lines) if not line.startswith("study par: "))]
    assert lines[len(events)].startswith("2 of 4 members completed"), lines  # then the summary, nothing between
    for seed in (0, 1):
        log = logs / f"par-first-s{seed}.log"
        assert f"study par: started first/seed {seed} (run par-first-s{seed}); log {log}" in events
        assert f"run par-first-s{seed} of {run_helpers.FAKE}" in log.read_text()
    assert f"study par: failed first/seed 1 (run par-first-s1); log {logs / 'par-first-s1.log'}: RuntimeError" in stdout
    assert "fake failure at iteration 2" in (logs / "par-first-s1.log").read_text()
    assert "\x1b[" not in stdout + stderr and "par-first-s0 completed" not in stdout + stderr


def _fingerprint(tmp_path, run_id):
    files = [
        tmp_path / "results" / run_id / records.MANIFEST_FILE,
        tmp_path / "artifacts" / run_id / records.METRICS_FILE,
    ]
    return [hashlib.sha256(path.read_bytes()).hexdigest() for path in files]


def _iterations(tmp_path, run_ids):
    rows = []
    for run_id in run_ids:
        rows += records.read_json_lines(str(tmp_path / "artifacts" / run_id / records.METRICS_FILE))
    return [row["training_iteration"] for row in rows]


def test_sigterm_mid_study_then_resume_repeats_no_finished_trial_and_loses_no_row(tmp_path):
    knobs = {"FAKE_RECIPE_ITERATIONS": 12, "FAKE_RECIPE_SLEEP_S": 0.5}

    def first_pair_done_second_started():  # two at a time: the running ones have all their iterations ahead
        record = _record(tmp_path, "stop")
        statuses = [member["status"] for member in record["members"]] if record else []
        return statuses.count("completed") >= 2 and "running" in statuses

    code, stderr = run_helpers.run_until(
        _args(tmp_path, "--study-id", "stop"),
        first_pair_done_second_started,
        signal.SIGTERM,
        "two finished members and a running one",
        **knobs,
    )
    assert code == 128 + signal.SIGTERM, stderr[-3000:]
    printed = shlex.split(re.search(r"continue it with `([^`]+)`", stderr).group(1))  # run as printed:
    assert printed[:3] == ["python", "-m", "rl.harness.commands.cli"]  # tests/printed_commands_test.py: under Bazel
    record = _record(tmp_path, "stop")
    assert record["status"] == "interrupted"
    finished = {key: member["runs"][0] for key, member in _members(record).items() if member["status"] == "completed"}
    stopped = {key for key, member in _members(record).items() if member["status"] == "interrupted"}
    assert finished and stopped
    before = {run_id: _fingerprint(tmp_path, run_id) for run_id in finished.values()}

    code, _stdout, stderr = run_helpers.run_cli(printed[3:], timeout=240, **knobs)
    assert code == 0, stderr[-3000:]
    members = _members(_record(tmp_path, "stop"))
    for key, run_id in finished.items():
        assert members[key]["runs"] == [run_id]  # not run again
    assert {run_id: _fingerprint(tmp_path, run_id) for run_id in finished.values()} == before
    for key in stopped:
        runs = members[key]["runs"]
        assert len(runs) == 2 and members[key]["status"] == "completed"
        parent = json.loads((tmp_path / "results" / runs[1] / records.MANIFEST_FILE).read_text())["parent_run"]
        assert parent["parent_run_id"] == runs[0]
        assert _iterations(tmp_path, runs) == list(range(1, 13))  # every row once, none lost
    assert _record(tmp_path, "stop")["status"] == "completed"
    assert len(_record(tmp_path, "stop")["command_lines"]) == 2


def test_a_study_killed_with_sigkill_reads_as_crashed_leaves_no_process_and_resumes(tmp_path):
    knobs = {"FAKE_RECIPE_ITERATIONS": 12, "FAKE_RECIPE_SLEEP_S": 0.5}
    process = run_helpers.start_cli(_args(tmp_path, "--study-id", "killed"), **knobs)
    try:

        def members_running():
            record = _record(tmp_path, "killed")
            return record and [member for member in record["members"] if member["status"] == "running"]

        run_helpers.wait_for(members_running, 240, "a running member")
        run_helpers.kill_with_descendants(
            process, 30, "every process of the killed study (Ray's, the members' runs) to end"
        )
    finally:
        run_helpers.stop_group(process)
    folder = tmp_path / "results" / "studies" / "killed"
    assert _record(tmp_path, "killed")["status"] == "running"  # as written; read back, it is crashed
    assert StudyRecord.read(folder).effective_status == "crashed"

    code, _, stderr = run_helpers.run_cli(_args(tmp_path, "--resume", "killed"), timeout=240, **knobs)
    assert code == 0, stderr[-3000:]
    assert "study killed crashed" in stderr
    assert StudyRecord.read(folder).effective_status == "completed"


def test_ctrl_c_while_a_member_probes_then_resume_completes_the_study_without_retrying_failures(tmp_path):
    args = [
        "study",
        STAGED_STUDY,
        "--results-dir",
        tmp_path / "results",
        "--artifacts-dir",
        tmp_path / "artifacts",
        "--max-concurrent",
        "1",
    ]
    logs = tmp_path / "artifacts" / "studies" / "probe" / "logs"

    def a_member_probing():
        return logs.is_dir() and any("stage probing" in log.read_text() for log in logs.iterdir())

    code, stderr = run_helpers.run_until(
        [*args, "--study-id", "probe"],
        a_member_probing,
        signal.SIGINT,
        "a member in its probing stage",
        STAGED_RECIPE_WAIT_IN="probing",
    )
    assert code == 128 + signal.SIGINT, stderr[-3000:]
    stopped = [member for member in _record(tmp_path, "probe")["members"] if member["status"] == "interrupted"]
    assert len(stopped) == 1

    code, _stdout, stderr = run_helpers.run_cli([*args, "--resume", "probe"], timeout=240)
    assert code == 0, stderr[-3000:]
    record = _record(tmp_path, "probe")
    assert record["status"] == "completed" and {member["status"] for member in record["members"]} == {"completed"}
    resumed = _members(record)[(stopped[0]["agent"], stopped[0]["seed"])]["runs"]
    assert len(resumed) == 2 and _iterations(tmp_path, resumed[1:]) == []  # it trained nothing again
    assert (tmp_path / "results" / resumed[1] / "plotting.json").is_file()


def test_a_study_waiting_for_resources_stops_on_the_first_signal_and_is_recorded_interrupted(tmp_path):
    # A one-CPU cluster and two CPUs a trial: no trial can ever start, Tune waits (a cluster may grow).
    with loopback_cluster.running(head_cpus=1, worker_cpus=[]) as cluster:
        process = run_helpers.start_cli(
            _args(tmp_path, "--study-id", "wait", "--cpus-per-trial", "2", "--ray-address", cluster.address)
        )
        try:
            tune_storage = tmp_path / "artifacts" / "studies" / "wait"
            run_helpers.wait_for(lambda: any(tune_storage.glob("tune-*/*")), 180, "Tune placing the trials")
            time.sleep(5)  # Tune's loop runs with every trial pending
            process.send_signal(signal.SIGINT)
            sent = time.monotonic()
            _, stderr = process.communicate(timeout=120)
            took = time.monotonic() - sent
        finally:
            run_helpers.stop_group(process)
    assert process.returncode == 128 + signal.SIGINT, stderr[-3000:]
    assert took < 20, took
    assert "--resume wait" in stderr
    record = _record(tmp_path, "wait")
    assert record["status"] == "interrupted"
    assert [(member["status"], member["runs"]) for member in record["members"]] == [("pending", [])] * 4
