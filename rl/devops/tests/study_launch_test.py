"""A study on rented instances (`up --study`): its members in fixed shares, one share per instance, against the fake
API, fake instances (local processes running the real bootstrap and a real `study --share` on Ray Tune) and moto's
S3 server as the store; bad input refused in one line, nothing rented."""

import datetime
import json
import pathlib
import re
import subprocess
import time

import pytest

from rl.devops.tests import managed_fixtures as fixtures
from rl.devops.tests.managed_fixtures import *  # its fixtures (its __all__), which pytest finds by name here
from rl.devops.vast import bootstrap, fleet, managed, offers, redact, state, store_runs, study_launch
from rl.devops.vast.testing import fake_api
from rl.harness import env_vars

STUDY = ("--study", "//experiments/x:study")
STUDY_MODULE = "rl.harness.tests.fake_study"  # two agents x seeds 0 and 1: members first/0, second/0, first/1, second/1


@pytest.fixture
def fake(api_key):
    """Six good offers (ids 1-6; offer 1 scores best): three shares, their replacements, machines quarantined."""
    offers_ = [fake_api.offer(i, dph_total=round(0.30 + 0.05 * i, 2)) for i in range(1, 7)]
    with fake_api.FakeVastApi(api_key, offers_, lifetime_s=600, boot_delay_s=0.3) as server:
        yield server


# ---- bad input: one line each, exit 2, nothing rented ---------------------------------------------------------


def test_a_study_with_seeds_is_refused(cli_run, fake, store_env):
    code, output = cli_run("--sink", "store", job=(*STUDY, "--seeds", "0-2"))
    assert code == 2 and fixtures.error_line(output).startswith(
        "error: --seeds goes with --target: study //experiments/x:study runs the seeds its STUDY declares"
    )
    assert fake.calls("PUT", r"/asks/") == []


def test_a_study_over_several_instances_without_a_store_is_refused(cli_run, fake, monkeypatch, tmp_path):
    fixtures.no_store(monkeypatch, tmp_path)
    code, output = cli_run("--instances", "2", job=STUDY)
    assert code == 2 and "a study over 2 instances meets only in the store, and no store is configured" in (
        fixtures.error_line(output)
    )
    assert fake.calls("PUT", r"/asks/") == []


def test_a_study_on_one_instance_needs_the_store_sink(cli_run, fake, store_env):
    code, output = cli_run(job=STUDY)
    assert code == 2 and fixtures.error_line(output) == (
        "error: a study's members on an instance go to the store, which outlives it: add --sink store"
    )
    assert fake.calls("PUT", r"/asks/") == []


def test_a_study_over_no_instance_is_refused(cli_run, fake, store_env):
    code, output = cli_run("--sink", "store", "--instances", "0", job=STUDY)
    assert code == 2 and fixtures.error_line(output) == "error: --instances 0: a study needs at least one instance"
    assert fake.calls("PUT", r"/asks/") == []


def test_a_study_whose_commit_is_not_pushed_is_refused(cli_run, fake, store_env, instance_store_file):
    code, output = cli_run("--sink", "store", "--instance-store-file", instance_store_file, commit="f" * 40, job=STUDY)
    assert code == 2 and fixtures.error_line(output).endswith("push it (git push) or pin a pushed commit")
    assert fake.calls("PUT", r"/asks/") == []


@pytest.mark.parametrize(
    ("study_id", "index", "count", "message"),
    [
        ("s1", 3, 3, "share 3/3: expected 0 <= index < count"),
        ("s1", -1, 3, "share -1/3: expected 0 <= index < count"),
        ("a/b", 0, 3, "study id 'a/b' contains '/'"),
    ],
)
def test_a_bad_share_is_refused_in_one_line(study_id, index, count, message):
    with pytest.raises(redact.DevopsError) as refused:
        bootstrap.StudyShare(study_id, index, count)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_a_job_is_a_seed_or_a_share_never_both():
    share = bootstrap.StudyShare("s1", 0, 2)
    for seed, given in ((3, share), (None, None)):
        with pytest.raises(redact.DevopsError, match="must be >= 0 \\(and None only for a study's share\\)"):
            bootstrap.Job(target="//experiments/x:study", seed=seed, run_id="r1", share=given)


# ---- the launch ---------------------------------------------------------------------------------------------


def test_a_study_launch_rents_one_instance_per_share(cli_run, fake, store_env, instance_store_file):
    code, output = cli_run(
        "--sink",
        "store",
        "--interruptible",
        "--instance-store-file",
        instance_store_file,
        "--instances",
        "3",
        job=STUDY,
    )
    assert code == 0, output
    assert "(managed): 3 instances" in output and "launched; keep it going with `watch " in output
    scripts = sorted(request.body["onstart"] for request in fake.calls("PUT", r"/asks/"))
    (study_id,) = set(re.findall(r"--study-id (\S+) --share", "".join(scripts)))
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", study_id)
    shares = [re.search(r"bazel run \S+ //experiments/x:study -- (.*?) --results-dir", s).group(1) for s in scripts]
    assert sorted(shares) == [f"--study-id {study_id} --share {k}/3" for k in range(3)]
    assert all("--seed" not in script and "--upload-artifacts" in script for script in scripts)
    assert "members 2/3: active, 1 instances" in output
    assert f"study {study_id}: `bazel run //experiments/x:study -- --resume {study_id}` gathers its shares" in output


# ---- the watcher's reading of a share, its record written into the store by hand (no instance process) ----------


def _study_launch(fl, pin, count, extra_args=(), silence_s=20.0, start_timeout_s=60.0):
    """A study launch over `count` instances, recorded, and what its watcher reads of its shares."""
    setup = bootstrap.Bootstrap(repo=pin, upload_artifacts=True, max_hours=1.0, self_end=True, end_grace_s=5)
    launch = managed.Launch.new(
        "ab12cd",
        study_launch.jobs("//experiments/x:study", count, launch_id="ab12cd", extra_args=extra_args),
        setup,
        offers.Gates(max_dph=0.8, interruptible=True),
        image="python:3.11-bookworm",
        boot_timeout_s=fixtures.FAST.boot_timeout_s,
        silence_s=silence_s,
        start_timeout_s=start_timeout_s,
    )
    managed.record_launch(fl.store, launch)
    runs = store_runs.StoreRuns(store_runs.open_configured())
    return launch, study_launch.ShareRuns(runs, fl.store, launch)


def _put_share(launch, index, status, members, *, age_s=0.0, drained=False):
    """Share `index`'s record in the store, as its study command mirrors it: `members` (agent, seed, status, runs)."""
    store = store_runs.open_configured(write=True)
    folder = f"{store.config.prefix}/{STUDY_MODULE}/studies/{launch.study_id}.share-{index}-of-{len(launch.shares)}"
    record = {
        "status": status,
        "updated_at": datetime.datetime.fromtimestamp(time.time() - age_s, datetime.UTC).isoformat(),
        "members": [{"agent": a, "seed": s, "status": m, "runs": list(runs)} for a, s, m, runs in members],
    }
    store.put_bytes(json.dumps(record).encode(), f"{folder}/results/study.json")
    index_status = json.dumps({"status": "complete" if drained else "running"}).encode()
    store.put_bytes(index_status, f"{folder}/results/remote_artifacts.json")


def test_a_share_is_read_from_its_record_and_its_members_runs_in_the_store(fl, fake, pin, store_env, progress):
    launch, runs = _study_launch(fl, pin, 2)  # share 0: first/0 and first/1
    watcher = managed.Watcher(fl, runs, "ab12cd", instance_env=dict(store_env))
    watcher.tick()
    (rented,) = [record for record in fl.store.read().live() if record.share == 0]
    first, second = f"{launch.study_id}-first-s0", f"{launch.study_id}-first-s1"
    fixtures.put_run(first, checkpoint=8, heartbeat_age_s=3600)
    _put_share(launch, 0, "running", [("first", 0, "running", [first])], age_s=3600)
    assert runs.look([rented.run_id]) == {}  # an earlier instance's record: this one has written nothing yet

    fixtures.put_run(first, status="completed", checkpoint=30)
    fixtures.put_run(second, checkpoint=4)
    _put_share(launch, 0, "running", [("first", 0, "completed", [first]), ("first", 1, "running", [second])])
    seen = runs.look([rented.run_id])[rented.run_id]
    assert (seen.status, seen.checkpoint_iteration, seen.remote_complete) == ("running", 34, False)
    assert time.time() - seen.heartbeat_at < 60

    # Every member ended, one of them failed (the study's to report): the share is done once its mirror drained.
    fixtures.put_run(second, status="failed", checkpoint=4, error="loss is nan")
    _put_share(launch, 0, "failed", [("first", 0, "completed", [first]), ("first", 1, "failed", [second])])
    assert runs.look([rented.run_id])[rented.run_id].status == "completed"
    watcher.tick()
    assert managed.launch_of(fl.store.read(), "ab12cd").shares[0].status == managed.ACTIVE  # not drained yet
    _put_share(
        launch, 0, "failed", [("first", 0, "completed", [first]), ("first", 1, "failed", [second])], drained=True
    )
    watcher.tick()
    assert managed.launch_of(fl.store.read(), "ab12cd").shares[0].status == managed.COMPLETED
    assert rented.instance_id not in fake.instances


def test_two_watchers_at_once_never_rent_twice_for_one_share_of_a_study(fl, fake, pin, store_env, tmp_path, progress):
    launch, runs = _study_launch(fl, pin, 3)
    others = [fleet.Fleet(fl.account, state.StateFile(tmp_path / "state"), fl.progress, fl.config) for _ in range(2)]
    runs_of = [study_launch.ShareRuns(runs.runs, other.store, launch) for other in others]
    fixtures.tick_at_once(
        [managed.Watcher(other, seen, "ab12cd", instance_env=dict(store_env)) for other, seen in zip(others, runs_of)]
    )
    creates = sorted(request.body["label"] for request in fake.calls("PUT", r"/asks/"))
    assert creates == ["rlh-ab12cd-000-1", "rlh-ab12cd-001-1", "rlh-ab12cd-002-1"] and len(fake.instances) == 3


# ---- end to end: preempted, never booted, capped; gathered and completed ---------------------------------------


def _member_rows(hosts, instance_id, run_id):
    """The training iterations the member run `run_id` logged on instance `instance_id` (its own disk)."""
    (path,) = (hosts.folder(instance_id) / "work" / "out" / "artifacts").rglob(f"{run_id}/metrics.jsonl")
    return [json.loads(line)["training_iteration"] for line in path.read_text().splitlines() if line.strip()]


def _operator_study(store_env, tmp_path, *argv):
    """`rl-harness study` on the operator's machine (the runtime venv): exit code and output."""
    process = subprocess.run(
        [fixtures.runtime_python(), "-m", "rl.harness.commands.cli", "study", STUDY_MODULE, *argv],
        env={
            **store_env,
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path / "operator"),
            "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[3]),
            "OMP_NUM_THREADS": "1",
            "FAKE_RECIPE_ITERATIONS": str(fixtures.ITERATIONS),
            "FAKE_RECIPE_SLEEP_S": "0.2",
            env_vars.MIRROR_INTERVAL_ENV: "0.2",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return process.returncode, process.stdout + process.stderr


@pytest.mark.slow
def test_a_study_over_three_instances_survives_a_preemption_a_dead_boot_and_the_cap(
    fl, fake, hosts, pin, store_env, progress, tmp_path
):
    hosts.environment["RLH_FAKE_RECIPE"] = f"study {STUDY_MODULE}"
    # A second an iteration: the cap must land while the resumed member still runs, however slow the watcher's ticks.
    hosts.environment["FAKE_RECIPE_SLEEP_S"] = "1.0"
    fake.never_boot_machines.add(1001)  # the best offer's machine (share 0's first instance) never boots
    # Shares: 0 = first/0 and second/1 (one at a time on its instance), 1 = second/0, 2 = first/1.
    launch, shares = _study_launch(
        fl, pin, 3, extra_args=("--max-concurrent", "1"), silence_s=60.0, start_timeout_s=120.0
    )
    study_id, runs = launch.study_id, shares.runs
    watcher = managed.Watcher(fl, shares, "ab12cd", instance_env=dict(store_env))

    def checkpoint(run_id):
        seen = runs.look([run_id]).get(run_id)
        return (seen.checkpoint_iteration or 0) if seen else 0

    def share_status(index):
        return managed.launch_of(fl.store.read(), "ab12cd").shares[index].status

    def live(share):
        return next((r for r in fl.store.read().live() if r.share == share and r.instance_id is not None), None)

    # Share 1 (second/0) preempted mid-member: outbid, its process killed with SIGKILL.
    member = f"{study_id}-second-s0"
    fixtures.until(lambda: checkpoint(member) >= 6, 240, "second/0 to checkpoint past 6", tick=watcher.tick)
    victim = live(1)
    fake.preempt(victim.instance_id)
    preempted_at = _member_rows(hosts, victim.instance_id, member)[-1]
    # Its replacement resumes it; then the cap is lowered below the projection (`watch ab12cd --budget`): the
    # least-advanced share, this one (its member was cut short once), is stopped mid-member.
    fixtures.until(lambda: checkpoint(f"{member}-a2") > preempted_at, 240, "second/0 to resume", tick=watcher.tick)
    # Share 2 ends first: its instance leaving the projection in the tick that applies the cap would bring the
    # total under the cap by itself, and nothing would be stopped.
    fixtures.until(lambda: share_status(2) == managed.COMPLETED, 240, "share 2 to complete", tick=watcher.tick)
    assert share_status(1) == managed.ACTIVE, progress.getvalue()
    capped = live(1)
    with fl.store.update() as current:
        current.launches["ab12cd"]["budget"] = managed.projection(current, launch, time.time()) - 0.05
    watcher.tick()
    resumed = _member_rows(hosts, capped.instance_id, f"{member}-a2")
    final = watcher.watch(time.time() + 240)

    statuses = [share.status for share in final.shares]
    assert statuses == [managed.COMPLETED, managed.STOPPED, managed.COMPLETED], progress.getvalue()
    assert "budget $" in final.shares[1].note and "members not completed: second/seed 0" in final.shares[1].note
    assert f"--resume {study_id}" in final.shares[1].note
    assert "never booted" in fl.store.read().records["rlh-ab12cd-000-1"].note
    assert {1001, victim.machine_id} <= set(fl.store.read().quarantined())
    assert resumed == list(range(resumed[0], resumed[-1] + 1)) and resumed[0] <= preempted_at + 1  # joins, no gap
    redone_preempted = preempted_at - (resumed[0] - 1)
    assert 0 <= redone_preempted <= fixtures.ITERATIONS / 10, (preempted_at, resumed[0])
    assert fake.instances == {} and hosts.running() == []  # nothing left running
    spent = managed.spend(fl.store.read(), "ab12cd", time.time())
    assert spent == pytest.approx(fake.bill(), rel=0.05)  # accounted against the fake API's bill

    # The operator's machine: the shares gathered from the store, the capped member resumed, the summary written.
    roots = ["--results-dir", str(tmp_path / "results"), "--artifacts-dir", str(tmp_path / "artifacts")]
    code, output = _operator_study(store_env, tmp_path, "--resume", study_id, *roots)
    assert code == 0, output[-4000:]
    folder = tmp_path / "results" / "studies" / study_id
    record = json.loads((folder / "study.json").read_text())
    assert record["status"] == "completed" and [(m["agent"], m["seed"], m["status"]) for m in record["members"]] == [
        ("first", 0, "completed"),
        ("second", 0, "completed"),
        ("first", 1, "completed"),
        ("second", 1, "completed"),
    ]
    assert record["members"][1]["runs"] == [member, f"{member}-a2", f"{member}-a3"]
    (metrics,) = (tmp_path / "artifacts").rglob(f"{member}-a3/metrics.jsonl")
    rows = [json.loads(line)["training_iteration"] for line in metrics.read_text().splitlines() if line.strip()]
    assert rows == list(range(rows[0], fixtures.ITERATIONS + 1)) and rows[0] <= resumed[-1] + 1  # joins, to the end
    redone_capped = resumed[-1] - (rows[0] - 1)
    assert 0 <= redone_capped <= fixtures.ITERATIONS / 10, (resumed[-1], rows[0])
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["completed"] == summary["members"] == 4
    print(
        f"redone: preempted {redone_preempted}/{fixtures.ITERATIONS}, capped {redone_capped}/{fixtures.ITERATIONS}; spend"
        f" ${spent:.5f} against the bill ${fake.bill():.5f}"
    )
