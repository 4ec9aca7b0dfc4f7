"""Managed launches against the fake API, fake instances (local processes running the real bootstrap
and a real harness run) and a real S3-compatible server (moto's) as the store: recovery, caps, self-ending."""

import datetime
import json
import re
import time

import pytest

from rl.devops.tests import managed_fixtures as fixtures
from rl.devops.tests.managed_fixtures import *  # its fixtures (its __all__), which pytest finds by name here
from rl.devops.vast import bootstrap, fleet, managed, offers, state, store_runs
from rl.harness import env_vars


def _launch(fl, pin, seeds, *, budget=None, max_hours=1.0, **setup_fields):
    setup = bootstrap.Bootstrap(
        repo=pin,
        upload_artifacts=True,
        max_hours=max_hours,
        self_end=True,
        end_grace_s=setup_fields.pop("end_grace_s", 5),
        failed_linger_s=1,
        **setup_fields,
    )
    jobs = fleet.make_jobs(["//experiments/x:y"], seeds, launch_id="ab12cd")
    launch = managed.Launch.new(
        "ab12cd",
        jobs,
        setup,
        offers.Gates(max_dph=0.8, interruptible=True),
        image="python:3.11-bookworm",
        budget=budget,
        boot_timeout_s=fixtures.FAST.boot_timeout_s,
        silence_s=20.0,
        start_timeout_s=60.0,
    )
    managed.record_launch(fl.store, launch)
    return launch


def _watcher(fl, store_env):
    return managed.Watcher(
        fl, store_runs.StoreRuns(store_runs.open_configured()), "ab12cd", instance_env=dict(store_env)
    )


def _metrics(hosts, instance_id, run_id):
    path = hosts.folder(instance_id) / "work" / "out" / "artifacts" / run_id / "metrics.jsonl"
    return [json.loads(line)["training_iteration"] for line in path.read_text().splitlines() if line.strip()]


def _first_row_at(hosts, record):
    """When the instance's run logged its first training row (epoch seconds), or None."""
    path = hosts.folder(record.instance_id) / "work" / "out" / "artifacts" / record.run_id / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return datetime.datetime.fromisoformat(json.loads(lines[0])["harness/logged_at"]).timestamp() if lines else None


@pytest.mark.slow
def test_a_preempted_instance_is_replaced_and_its_run_resumes_from_the_store(fl, fake, hosts, pin, store_env, progress):
    fake.never_boot_machines.add(1001)  # the best offer's machine: its instance never boots
    _launch(fl, pin, [0, 1])
    watcher = _watcher(fl, store_env)
    runs = watcher.runs

    def share0():
        return managed.launch_of(fl.store.read(), "ab12cd").shares[0]

    def checkpointed():
        run_ids = share0().run_ids
        seen = runs.look(run_ids[-1:]) if run_ids else {}
        iteration = seen[run_ids[-1]].checkpoint_iteration if seen else None
        return iteration is not None and iteration >= 6

    fixtures.until(checkpointed, 120, "share 0's run to mirror a checkpoint past iteration 6", tick=watcher.tick)
    (victim,) = [r for r in fl.store.read().live() if r.share == 0]
    fake.preempt(victim.instance_id)  # outbid: stopped, its process killed with SIGKILL
    killed_at = _metrics(hosts, victim.instance_id, victim.run_id)[-1]
    final = watcher.watch(time.time() + 180)

    assert [share.status for share in final.shares] == [managed.COMPLETED] * 2, progress.getvalue()
    _first, *_ = [r for r in fl.store.read().records.values() if r.share == 0]
    assert "never booted" in fl.store.read().records["rlh-ab12cd-000-1"].note
    assert 1001 in fl.store.read().quarantined() and victim.machine_id in fl.store.read().quarantined()
    resumed = fl.store.read().records[f"rlh-ab12cd-000-{victim.attempts + 1}"]
    assert f"resuming run {victim.run_id} from its newest checkpoint" in progress.getvalue()
    rows = _metrics(hosts, resumed.instance_id, resumed.run_id)
    assert rows == list(range(rows[0], fixtures.ITERATIONS + 1))  # the curve goes on to the end ...
    assert rows[0] <= killed_at + 1  # ... without a gap
    redone = killed_at - (rows[0] - 1)
    assert 0 <= redone <= fixtures.ITERATIONS / 10, (killed_at, rows[0])  # at most a tenth redone
    assert fake.instances == {} and hosts.running() == []  # nothing left running (each ended itself)
    spent = managed.spend(fl.store.read(), "ab12cd", time.time())
    assert spent == pytest.approx(fake.bill(), rel=0.05)  # accounted against the fake API's bill
    to_training = sorted(
        _first_row_at(hosts, record) - record.created_at
        for record in fl.store.read().records.values()
        if record.instance_id in hosts.started_at and _first_row_at(hosts, record) is not None
    )
    print(
        f"redone {redone}/{fixtures.ITERATIONS}; spend ${spent:.5f} against the bill ${fake.bill():.5f}; rented to training"
        f" {', '.join(f'{seconds:.1f}' for seconds in to_training)} s"
    )


# ---- the watcher's decisions, with runs written into the store by hand (no instance process) -----------------


def _live(fl, share):
    (record,) = [r for r in fl.store.read().live() if r.share == share]
    return record


def _shares(fl):
    return managed.launch_of(fl.store.read(), "ab12cd").shares


def test_two_watchers_at_once_never_rent_twice_for_one_share(fl, fake, pin, store_env, tmp_path, progress):
    _launch(fl, pin, [0, 1, 2])
    others = [
        fleet.Fleet(fl.account, state.StateFile(tmp_path / "state"), fleet.Progress(progress), fixtures.FAST)
        for _ in range(2)
    ]
    fixtures.tick_at_once([_watcher(other, store_env) for other in others])
    creates = [request.body["label"] for request in fake.calls("PUT", r"/asks/")]
    assert sorted(creates) == ["rlh-ab12cd-000-1", "rlh-ab12cd-001-1", "rlh-ab12cd-002-1"]
    assert len(fake.instances) == 3 and [len(share.run_ids) for share in _shares(fl)] == [1, 1, 1]


def test_a_run_that_fails_twice_the_same_way_is_recorded_failed(fl, fake, pin, store_env, progress):
    _launch(fl, pin, [0])
    watcher = _watcher(fl, store_env)
    watcher.tick()
    first = _live(fl, 0)
    fixtures.put_run(first.run_id, status="failed", checkpoint=4, error="loss is nan at iteration 5")
    fixtures.until(lambda: not watcher.tick() or len(_shares(fl)[0].run_ids) == 2, 30, "a second instance")
    assert first.instance_id not in fake.instances
    assert _shares(fl)[0].failures == ("RuntimeError: loss is nan at iteration 5",)
    assert f"resuming run {first.run_id} from its newest checkpoint" in progress.getvalue()
    second = _live(fl, 0)
    fixtures.put_run(second.run_id, status="failed", error="loss is nan at iteration 5")
    fixtures.until(lambda: not watcher.tick(), 30, "the share to end")
    (share,) = _shares(fl)
    assert share.status == managed.FAILED and share.note == (
        "failed twice the same way: RuntimeError: loss is nan at iteration 5"
    )
    assert fake.instances == {} and len(fake.calls("PUT", r"/asks/")) == 2


def test_a_silent_run_counts_as_lost_and_is_replaced(fl, fake, pin, store_env, progress):
    _launch(fl, pin, [0])
    watcher = _watcher(fl, store_env)
    fixtures.until(
        lambda: fl.store.read().live() and _live(fl, 0).status == state.RUNNING,
        30,
        "a running instance",
        tick=watcher.tick,
    )
    silent = _live(fl, 0)
    fixtures.put_run(silent.run_id, checkpoint=8, heartbeat_age_s=3600)
    watcher.tick()
    assert silent.instance_id not in fake.instances and silent.machine_id in fl.store.read().quarantined()
    assert "its run has been silent for over 20 s" in fl.store.read().records[silent.label].note
    watcher.tick()
    assert _live(fl, 0).label == "rlh-ab12cd-000-2" and f"resuming run {silent.run_id}" in progress.getvalue()


def test_no_instance_is_rented_that_would_pass_the_budget(fl, fake, pin, store_env, progress):
    # Bids: offer 1 at 0.1925 $/h, offer 2 at 0.22 $/h; an instance may live 1 h + 5 s.
    _launch(fl, pin, [0, 1], budget=0.30)
    watcher = _watcher(fl, store_env)
    watcher.tick()
    assert [share.status for share in _shares(fl)] == [managed.ACTIVE, managed.STOPPED]
    assert "would pass the budget $0.30" in _shares(fl)[1].note
    assert [request.body["price"] for request in fake.calls("PUT", r"/asks/")] == [0.1925]
    lines = managed.describe(fl.store.read(), "ab12cd", time.time())
    assert lines[0].startswith("launch ab12cd: spent $0.00 so far, projected $0.19 to the deadlines, cap $0.30")


def test_a_cap_passed_while_running_stops_the_least_advanced_share(fl, fake, pin, store_env, progress):
    _launch(fl, pin, [0, 1])
    watcher = _watcher(fl, store_env)
    watcher.tick()
    ahead, behind = _live(fl, 0), _live(fl, 1)
    fixtures.put_run(ahead.run_id, checkpoint=10)
    fixtures.put_run(behind.run_id, checkpoint=4)
    with fl.store.update() as current:  # what `watch --budget 0.25` does
        current.launches["ab12cd"]["budget"] = 0.25
    watcher.tick()
    assert [share.status for share in _shares(fl)] == [managed.ACTIVE, managed.STOPPED]
    assert _shares(fl)[1].note == f"budget $0.25; resume with --resume-from {behind.run_id}"
    assert behind.instance_id not in fake.instances and ahead.instance_id in fake.instances
    assert managed.projection(fl.store.read(), managed.launch_of(fl.store.read(), "ab12cd"), time.time()) <= 0.25


@pytest.mark.slow
def test_an_instance_ends_itself_at_its_deadline_with_no_watcher(fl, fake, hosts, pin, store_env, tmp_path):
    hung = tmp_path / "hung-run"  # a run that hangs and ignores its stop (SIGTERM), e.g. in a stuck call
    hung.write_text("#!/bin/bash\ntrap '' TERM\nsleep 120\n")
    hung.chmod(0o755)
    hosts.environment["RLH_FAKE_PYTHON"] = str(hung)
    _launch(fl, pin, [0], max_hours=0.002, end_grace_s=3)  # SIGTERM at 7.2 s; the end at 10.2 s
    _watcher(fl, store_env).tick()  # rented; then no watcher at all
    (record,) = fl.store.read().live()
    fixtures.until(lambda: record.instance_id not in fake.instances, 90, "the instance to end itself")
    (deleted,) = fake.calls("DELETE", rf"/instances/{record.instance_id}/$")
    assert deleted.headers["authorization"] == f"Bearer {fake.container_key(record.instance_id)}"  # its own key
    assert "RLH_END deadline" in fake.log_files[record.instance_id].read_text()
    assert hosts.running() == []


# ---- bad input: one line each, exit 2, nothing rented ---------------------------------------------------------


def test_several_instances_without_a_store_are_refused(cli_run, fake, monkeypatch, tmp_path):
    fixtures.no_store(monkeypatch, tmp_path)
    code, output = cli_run("--sink", "store")
    assert code == 2 and "3 instances meet only in the store, and no store is configured" in fixtures.error_line(output)
    assert fake.calls("PUT", r"/asks/") == []


def test_interruptible_without_a_store_is_refused(cli_run, fake, monkeypatch, tmp_path):
    fixtures.no_store(monkeypatch, tmp_path)
    code, output = cli_run("--interruptible")
    assert (
        code == 2 and "resumed only from a store" in fixtures.error_line(output) and "no store is configured" in output
    )
    assert fake.calls("PUT", r"/asks/") == []


def test_interruptible_with_a_store_still_needs_the_store_sink(cli_run, fake, store_env):
    code, output = cli_run("--interruptible")
    assert code == 2 and fixtures.error_line(output).endswith("add --sink store") and fake.calls("PUT", r"/asks/") == []


def test_a_budget_below_one_instance_hour_is_refused(cli_run, fake, store_env, instance_store_file):
    code, output = cli_run(
        "--sink", "store", "--interruptible", "--instance-store-file", instance_store_file, "--budget", "0.15"
    )
    assert code == 2 and fixtures.error_line(output) == (
        "error: --budget $0.15 is below one instance-hour of the cheapest offer that passes the gates ($0.193/h);"
        " raise the budget or relax --max-dph"
    )
    assert fake.calls("PUT", r"/asks/") == []


def test_a_commit_not_pushed_is_refused(cli_run, fake, store_env, instance_store_file):
    code, output = cli_run("--sink", "store", "--instance-store-file", instance_store_file, commit="f" * 40)
    line = fixtures.error_line(output)
    assert code == 2 and f"commit {'f' * 40} cannot be fetched from https://git.example.com/src" in line
    assert line.endswith("push it (git push) or pin a pushed commit") and fake.calls("PUT", r"/asks/") == []


def test_instances_without_a_study_are_refused(cli_run, fake):
    code, output = cli_run("--instances", "2")
    assert code == 2 and fixtures.error_line(output).startswith(
        "error: --instances 2 spreads a study's members (--study)"
    )
    assert fake.calls("PUT", r"/asks/") == []


def test_a_managed_launch_from_the_command_line(cli_run, fake, store_env, instance_store_file):
    code, output = cli_run(
        "--sink", "store", "--interruptible", "--instance-store-file", instance_store_file, "--budget", "20"
    )  # 3 bids of about $0.22/h for 12 h + 10 min
    assert code == 0, output
    assert "(managed): 3 instances" in output and "launched; keep it going with `watch " in output
    assert sorted(request.body["price"] for request in fake.calls("PUT", r"/asks/")) == [0.1925, 0.22, 0.2475]
    onstart = fake.calls("PUT", r"/asks/")[0].body["onstart"]
    assert "end_self deadline" in onstart and "--upload-artifacts" in onstart
    env = fake.calls("PUT", r"/asks/")[0].body["env"]
    assert env[env_vars.STORE_ENV] == store_env[env_vars.STORE_ENV] and env_vars.S3_KEY_ENV in env
    launch_id = next(line.split()[1] for line in output.splitlines() if line.startswith("launch "))

    command = cli_run.command
    code, output = command("status")
    assert code == 0 and f"launch {launch_id}: spent $0.00 so far, projected $" in output and "cap $20.00" in output
    code, output = command(
        "watch", launch_id, "--budget", "1", "--hours", "0.0003", "--instance-store-file", instance_store_file
    )
    assert code == 1 and "cap $1.00" in output
    assert len(re.findall(r": stopped, 1 instances, run \S+ \(budget \$1\.00; resume with --resume-from", output)) == 3
    assert fake.instances == {}  # a cap below what one instance costs to its deadline stops every job
