"""Launch, boot, durability gate, collect and reap against the fake API and fake instance disks."""

import dataclasses
import io
import pathlib
import time

import pytest

from rl.devops.vast import bootstrap, durability, fleet, offers, state
from rl.devops.vast.testing import b2_simulator, fake_api
from rl.devops.vast.testing.leaks import assert_no_secret
from rl.harness import env_vars

FAST = fleet.FleetConfig(
    boot_timeout_s=0.4, poll_interval_s=0.02, max_attempts=3, quarantine_hours=24, parallelism=4, log_tail=50
)
SETUP = bootstrap.Bootstrap(repo=bootstrap.GitPin("https://example.com/research.git", "c" * 40))
GIT_TOKEN = "ghp_" + "secrettoken" * 3
FAST_RETRIES = 3  # the `account` fixture's attempts per request


@pytest.fixture
def progress():
    return io.StringIO()


@pytest.fixture
def spec(tmp_path):
    return durability.SinkSpec(kind="copy", dest=str(tmp_path / "dest"), remote_out=SETUP.out_dir())


@pytest.fixture
def fl(tmp_path, account, rsync, progress):
    store = state.StateFile(tmp_path / "state")

    def sink_for(spec):
        return durability.build_sink(spec, known_hosts_dir=store.known_hosts_dir, runner=rsync)

    return fleet.Fleet(account, store, fleet.Progress(progress), FAST, sink_for=sink_for)


def _launch(fl, spec, seeds, launch_id="ab12cd"):
    jobs = fleet.make_jobs(["//experiments/mess3:reward_only"], seeds, launch_id=launch_id, now=0.0)
    plan = fl.plan(offers.Gates(max_dph=0.8), jobs, launch_id=launch_id, hours=2.0)
    return plan, fl.launch(
        plan, SETUP, spec, image="python:3.11-bookworm", extra_env={bootstrap.GIT_TOKEN_ENV: GIT_TOKEN}
    )


def _finish(fake, disks, record, *, exit_code=0):
    """The instance's bootstrap finished: outputs on its disk, RLH_DONE on its log."""
    port = fake.instances[record.instance_id]["ssh_port"]
    disks.finish_run(
        port=port,
        run_id=record.run_id,
        exit_code=exit_code,
        files={
            f"results/{record.run_id}/run_manifest.json": b"{}",
            f"artifacts/{record.run_id}/metrics.jsonl": b"{}\n",
        },
    )
    fake.set_logs(record.instance_id, f"RLH_PHASE run x\nRLH_DONE exit_code={exit_code} run_id={record.run_id}\n")


def _rent(account, offer_id, label):
    """An instance made behind the fleet's back (another tool, or a create whose answer was lost)."""
    return account.create_instance(offer_id, image="i", disk_gb=10, label=label, onstart="", env={}).instance_id


def test_n_seeds_launch_in_parallel_one_offer_each(fl, fake, spec, progress):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.delay(0.3), times=4)  # slow creates overlap when parallel
    plan, records = _launch(fl, spec, range(4))
    assert plan.estimate() == pytest.approx(2.0 * (0.35 + 0.40 + 0.45 + 0.50))
    assert [r.status for r in records] == [state.RUNNING] * 4
    assert sorted(r.offer_id for r in records) == [1, 2, 3, 4]
    assert [r.label for r in records] == [f"rlh-ab12cd-00{i}-1" for i in range(4)]
    assert [r.seed for r in records] == [0, 1, 2, 3]
    assert fake.max_in_flight >= 2
    creates = fake.calls("PUT", r"/asks/")
    for request in creates:
        seed = next(r.seed for r in records if r.label == request.body["label"])
        assert f"--seed {seed} --run-id" in request.body["onstart"]
        assert request.body["env"] == {bootstrap.GIT_TOKEN_ENV: GIT_TOKEN}  # secrets by env ...
        assert GIT_TOKEN not in request.body["onstart"]  # ... never on the command line
    assert len(fl.store.read().live()) == 4
    assert_no_secret(GIT_TOKEN, progress.getvalue(), fl.store.path)
    assert "rlh-ab12cd-000-1: instance" in progress.getvalue() and "is running" in progress.getvalue()


def test_a_machine_that_never_boots_is_quarantined_and_the_job_moves_on(fl, fake, spec, progress):
    fake.never_boot_machines.add(1001)  # the machine of the best offer
    _, (record,) = _launch(fl, spec, [7])
    assert record.label == "rlh-ab12cd-000-2" and record.offer_id == 2 and record.status == state.RUNNING
    current = fl.store.read()
    first = current.records["rlh-ab12cd-000-1"]
    assert first.status == state.DESTROYED and "never booted" in first.note
    assert first.instance_id not in fake.instances  # destroyed: it never ran, nothing to keep
    assert "never booted" in current.quarantined()[1001]
    assert "machine 1001 quarantined for 24 h" in progress.getvalue()
    again = fl.plan(offers.Gates(max_dph=0.8), fleet.make_jobs(["//x:y"], [1], launch_id="z"), launch_id="z", hours=1)
    assert fake.calls("POST", r"/bundles/")[-1].body["machine_id"] == {"notin": [1001]}
    assert 1 not in [s.offer["id"] for s in again.choice.ranked]


def test_a_job_left_without_offers_fails_alone(fl, fake, spec, progress):
    fake.never_boot_machines.add(1001)
    _, records = _launch(fl, spec, range(4))  # 4 offers, one dead: one job runs out
    assert sorted(r.status for r in records) == [state.FAILED] + [state.RUNNING] * 3
    (failed,) = [r for r in records if r.status == state.FAILED]
    assert failed.label.endswith("-2") and failed.note == "no offer left that passes the gates"
    assert "not launched" in progress.getvalue()


def test_a_bad_fleet_config_is_refused():
    with pytest.raises(Exception, match="max_attempts=0"):
        fleet.FleetConfig(max_attempts=0)


def test_a_failed_create_moves_to_the_next_offer(fl, fake, spec, progress):
    fake.add_fault("PUT", r"^/api/v0/asks/1/$", fake_api.Fault.status(500), times=FAST_RETRIES)
    _, (record,) = _launch(fl, spec, [0])
    assert record.offer_id == 2 and record.status == state.RUNNING
    first = fl.store.read().records["rlh-ab12cd-000-1"]
    assert first.status == state.FAILED and "nothing was rented" in first.note
    assert "trying the next offer" in progress.getvalue()


def test_a_create_whose_answer_is_lost_is_adopted_not_rented_again(fl, fake, spec, progress):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.after_acting(502))
    _, (record,) = _launch(fl, spec, [0])
    assert record.label == "rlh-ab12cd-000-1" and record.offer_id == 1 and record.status == state.RUNNING
    assert list(fake.instances) == [record.instance_id] and len(fake.calls("PUT", r"/asks/")) == 1
    assert f"instance {record.instance_id} has the label; adopting it" in progress.getvalue()


def test_too_few_offers_is_an_error_before_anything_is_rented(fl, fake, spec):
    with pytest.raises(Exception, match="5 jobs but only 4 offers pass the gates"):
        _launch(fl, spec, range(5))
    assert fake.calls("PUT", r"/asks/") == []


def test_an_unfinished_run_keeps_its_instance(fl, fake, spec):
    _, (record,) = _launch(fl, spec, [0])
    fake.set_logs(record.instance_id, "RLH_PHASE run 2025\n")
    outcome = fl.destroy(record.label)
    assert not outcome.destroyed and "has not finished (phase run)" in outcome.message
    assert record.instance_id in fake.instances


def test_secured_results_then_destroy(fl, fake, spec, disks, tmp_path):
    _, (record,) = _launch(fl, spec, [0])
    _finish(fake, disks, record)
    outcome = fl.destroy(record.label)
    assert outcome.destroyed and "run exit 0; 2 files" in outcome.message and "spent about $" in outcome.message
    assert record.instance_id not in fake.instances
    assert (tmp_path / "dest" / record.run_id / "results" / record.run_id / "run_manifest.json").exists()
    ended = fl.store.read().records[record.label]
    assert ended.status == state.DESTROYED and ended.ended_at is not None


def test_a_failed_copy_keeps_the_instance_and_says_so(fl, fake, spec, disks, rsync, api_key):
    _, (record,) = _launch(fl, spec, [0])
    _finish(fake, disks, record)
    rsync.failures[fake.instances[record.instance_id]["ssh_port"]] = (255, f"ssh: denied (key {api_key})")
    outcome = fl.destroy(record.label)
    assert not outcome.destroyed and outcome.message.startswith("KEPT (results not secured, instance still billing)")
    assert record.instance_id in fake.instances
    kept = fl.store.read().records[record.label]
    assert kept.status == state.KEPT and "rsync exit 255" in kept.note
    assert_no_secret(api_key, outcome.message, fl.store.path)
    rsync.failures.clear()  # the network is back: the next try secures it
    assert fl.destroy(record.label).destroyed


def test_an_instance_that_may_have_run_unwatched_is_not_destroyed_ungated(fl, fake, spec, disks, rsync):
    # An interrupted `up` (or `reap` adopting an instance) leaves the record `booting`; the instance
    # may have run since and now be exited or offline: only the durability gate may let it go.
    _, (record,) = _launch(fl, spec, [0])
    fl.store.set(record.label, status=state.BOOTING)
    fake.set_status(record.instance_id, "exited")
    fake.set_logs(record.instance_id, "RLH_PHASE run x\nstep 1\n")
    outcome = fl.destroy(record.label)
    assert not outcome.destroyed and "has not finished (phase run)" in outcome.message
    assert record.instance_id in fake.instances
    _finish(fake, disks, record)
    outcome = fl.destroy(record.label)
    assert outcome.destroyed and "run exit 0; 2 files" in outcome.message and len(rsync.calls) == 1


def test_an_instance_that_never_started_is_destroyed_without_the_gate(fl, fake, spec, rsync):
    _, (record,) = _launch(fl, spec, [0])
    fl.store.set(record.label, status=state.BOOTING)
    fake.set_status(record.instance_id, "loading")
    outcome = fl.destroy(record.label)
    assert outcome.destroyed and "destroyed before it ever ran" in outcome.message and rsync.calls == []


def test_discarding_results_is_explicit(fl, fake, spec, rsync):
    _, (record,) = _launch(fl, spec, [0])
    outcome = fl.destroy(record.label, discard_results=True)
    assert outcome.destroyed and "results NOT secured" in outcome.message and rsync.calls == []


def test_collect_destroys_finished_runs_and_stops_at_the_deadline(fl, fake, spec, disks):
    _, records = _launch(fl, spec, [0, 1])
    _finish(fake, disks, records[0])
    outcomes = fl.collect([r.label for r in records], deadline=time.time() + 0.3)
    assert [o.destroyed for o in outcomes] == [True, False]
    assert "still running at the deadline" in outcomes[1].message
    assert list(fake.instances) == [records[1].instance_id]


def test_status_shows_phase_and_spend(fl, fake, spec, disks):
    _, records = _launch(fl, spec, [0, 1])
    _finish(fake, disks, records[0], exit_code=2)
    fake.set_logs(records[1].instance_id, "RLH_PHASE checkout t\n")
    lines = fl.status()
    assert "running/running done (exit 2)" in lines[0] and "running/running checkout" in lines[1]
    assert lines[-1].startswith("live: 2 instances, $0.750/h; spent so far (estimate): $")


def test_status_names_the_query_that_failed_and_still_shows_the_others(fl, fake, spec):
    _, records = _launch(fl, spec, [0, 1])
    fake.set_logs(records[1].instance_id, "RLH_PHASE checkout t\n")
    fake.add_fault("PUT", rf"/request_logs/{records[0].instance_id}/$", fake_api.Fault.status(500), times=FAST_RETRIES)
    lines = fl.status()
    assert "running/running (log query failed: logs of instance" in lines[0] and "HTTPError: 500" in lines[0]
    assert "running/running checkout" in lines[1] and lines[-1].startswith("live: 2 instances")


def test_host_keys_are_kept_per_instance_even_on_a_reused_host_and_port(fl, fake, spec, disks, rsync):
    # vast.ai hands a host:port on to a later instance: its host key must not be checked against the old one's.
    _, records = _launch(fl, spec, [0, 1])
    fake.instances[records[1].instance_id]["ssh_port"] = fake.instances[records[0].instance_id]["ssh_port"]
    for record in records:
        _finish(fake, disks, record)
        assert fl.destroy(record.label).destroyed
    ssh_options = [call[call.index("-e") + 1] for call in rsync.calls]
    assert len(set(option.split()[2] for option in ssh_options)) == 1  # the same port, twice
    known_hosts = [option.split("UserKnownHostsFile=")[1].split()[0] for option in ssh_options]
    assert known_hosts == [str(fl.store.known_hosts_dir / f"instance-{r.instance_id}") for r in records]
    assert fl.store.known_hosts_dir.is_dir() and (fl.store.known_hosts_dir.stat().st_mode & 0o077) == 0


def test_reap_finds_orphans_adopts_lost_creates_and_marks_vanished(fl, fake, spec, account):
    _, (tracked, gone) = _launch(fl, spec, [0, 1])
    fake.instances.pop(gone.instance_id)  # destroyed behind our back
    fake.offers.update({9: fake_api.offer(9), 10: fake_api.offer(10), 11: fake_api.offer(11)})
    orphan = _rent(account, 9, "rlh-zz9999-000-1")
    foreign = _rent(account, 10, "someone-else")
    lost = state.Record(
        label="rlh-ab12cd-005-1",
        launch_id="ab12cd",
        target="//x:y",
        seed=5,
        run_id="r5",
        sink="copy",
        dest=spec.dest,
        remote_out=spec.remote_out,
    )
    never = dataclasses.replace(lost, label="rlh-ab12cd-006-1", seed=6, run_id="r6")
    with fl.store.update() as current:
        current.records[lost.label] = lost  # its create call never returned
        current.records[never.label] = never  # its create call failed, nothing was made
    adopted = _rent(account, 11, lost.label)

    lines = fl.reap(destroy=False)
    assert f"{gone.label}: instance {gone.instance_id} is gone; marked vanished" in lines
    assert f"{lost.label}: adopted instance {adopted} (its create call never returned)" in lines
    assert f"{never.label}: no instance has its label; marked failed" in lines
    assert any(line.startswith(f"orphan: instance {orphan} label rlh-zz9999-000-1") for line in lines)
    assert lines[-1].startswith("1 orphans; run `reap --yes`")
    assert orphan in fake.instances
    fl.reap(destroy=True)
    assert sorted(fake.instances) == sorted([tracked.instance_id, foreign, adopted])
    assert fl.store.read().records[gone.label].status == state.VANISHED


def test_a_b2_launch_sends_its_own_key_and_never_the_local_one(tmp_path, account, fake, rsync, progress):
    bucket, local = b2_simulator.bucket("rl-artifacts", prefix="rl-harness")
    store = state.StateFile(tmp_path / "state")
    setup = dataclasses.replace(SETUP, upload_artifacts=True)
    spec = durability.SinkSpec(
        kind="b2", dest=str(tmp_path / "dest"), remote_out=setup.out_dir(), b2_bucket="rl-artifacts"
    )

    def sink_for(spec):
        copy = durability.CopyBack(
            dest=pathlib.Path(spec.dest), known_hosts_dir=store.known_hosts_dir, include_artifacts=False, runner=rsync
        )
        return durability.B2Mirror(copy=copy, store=durability.B2Store(bucket), prefix=local.prefix)

    b2_fleet = fleet.Fleet(account, store, fleet.Progress(progress), FAST, sink_for=sink_for)
    jobs = fleet.make_jobs(["//experiments/mess3:reward_only"], range(2), launch_id="ab12cd", now=0.0)
    plan = b2_fleet.plan(offers.Gates(max_dph=0.8), jobs, launch_id="ab12cd", hours=2.0)
    records = b2_fleet.launch(plan, setup, spec, image="python:3.11-bookworm")
    assert [r.status for r in records] == [state.RUNNING] * 2
    sent = [request.body for request in fake.calls("PUT", r"/asks/")]
    key_ids = {body["env"][env_vars.B2_KEY_ID_ENV] for body in sent}
    assert len(key_ids) == 1 and local.key_id not in key_ids  # one key for the launch, not ours
    assert {body["env"][env_vars.B2_PREFIX_ENV] for body in sent} == {"rl-harness/launches/ab12cd"}
    for secret in (local.key, local.key_id):
        assert_no_secret(secret, *sent, progress.getvalue(), store.path)
    launch_key = next(k for k in bucket.api.list_keys() if k.id_ in key_ids)
    assert launch_key.key_name == "rlh-ab12cd" and "deleteFiles" not in launch_key.capabilities
    # The key outlives the longest run (max_hours) by the margin, and no more.
    expected_s = SETUP.max_hours * 3600 + fleet.LAUNCH_CREDENTIALS_MARGIN_S
    assert abs(launch_key.expiration_timestamp_millis / 1000 - time.time() - expected_s) < 60
