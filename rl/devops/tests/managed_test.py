"""Managed launches against the fake API, fake instances (local processes running the real bootstrap
and a real harness run) and a real S3-compatible server (moto's) as the store: recovery, caps, self-ending."""

import io
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from rl.devops.vast import bootstrap, fleet, managed, offers, state, store_runs
from rl.devops.vast.testing import fake_api, fake_hosts
from rl.harness import settings
from rl.harness.remote import stores
from rl.harness.tests import s3_server

REMOTE = "https://git.example.com/"
ITERATIONS = 30
FAST = fleet.Settings(boot_timeout_s=2.0, poll_interval_s=0.2, quarantine_hours=24, log_tail=50)


@pytest.fixture(scope="module")
def server():
    with s3_server.S3Server() as running:
        yield running


@pytest.fixture
def fake(api_key):
    """Four good offers (ids 1-4; offer 1 scores best), for as long as a few real runs take."""
    offers_ = [fake_api.offer(i, dph_total=round(0.30 + 0.05 * i, 2)) for i in range(1, 5)]
    with fake_api.FakeVastApi(api_key, offers_, lifetime_s=400, boot_delay_s=0.3) as server:
        yield server


@pytest.fixture
def store_env(server, monkeypatch):
    """The store on this machine and on the instances: moto's bucket, the read-write key."""
    key_id, key = server.read_write
    variables = {settings.STORE_ENV: f"s3://{server.bucket}/managed-{time.time_ns()}",
                 settings.STORE_ENDPOINT_ENV: server.endpoint, settings.S3_KEY_ID_ENV: key_id, settings.S3_KEY_ENV: key}
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return variables


def _git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def pin(tmp_path):
    """A pushed commit of an experiment repository, served from a local folder under an https:// name."""
    source = tmp_path / "git" / "src"
    source.mkdir(parents=True)
    _git("init", "-q", cwd=source)
    (source / "BUILD").write_text("# experiment\n")
    _git("add", "BUILD", cwd=source)
    _git("commit", "-q", "-m", "first", cwd=source)
    return bootstrap.GitPin(REMOTE + "src", _git("rev-parse", "HEAD", cwd=source))


@pytest.fixture
def git_env(tmp_path):
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{tmp_path / 'git'}/.insteadOf",
            "GIT_CONFIG_VALUE_0": REMOTE}


@pytest.fixture
def hosts(fake, tmp_path, git_env):
    repo_root = pathlib.Path(__file__).resolve().parents[3]
    environment = {**git_env, "RLH_FAKE_PYTHON": sys.executable, "RLH_FAKE_RECIPE": "rl.harness.tests.fake_recipe",
                   "PYTHONPATH": str(repo_root), "OMP_NUM_THREADS": "1", "FAKE_RECIPE_ITERATIONS": str(ITERATIONS),
                   "FAKE_RECIPE_SLEEP_S": "0.5", settings.MIRROR_INTERVAL_ENV: "0.2"}
    running = fake_hosts.FakeHosts(fake, tmp_path / "hosts", workdir=bootstrap.DEFAULT_WORKDIR,
                                   environment=environment)
    fake.hosts.append(running)
    yield running
    running.close()


@pytest.fixture
def progress():
    return io.StringIO()


@pytest.fixture
def fl(tmp_path, account, progress):
    return fleet.Fleet(account, state.StateFile(tmp_path / "state"), fleet.Progress(progress), FAST)


def _launch(fl, pin, seeds, *, budget=None, max_hours=1.0, **setup_fields):
    setup = bootstrap.Bootstrap(repo=pin, upload_artifacts=True, max_hours=max_hours, self_end=True,
                                end_grace_s=setup_fields.pop("end_grace_s", 5), failed_linger_s=1, **setup_fields)
    jobs = fleet.make_jobs(["//experiments/x:y"], seeds, launch_id="ab12cd")
    launch = managed.Launch.new("ab12cd", jobs, setup, offers.Gates(max_dph=0.8, interruptible=True),
                                image="python:3.11-bookworm", budget=budget, boot_timeout_s=FAST.boot_timeout_s,
                                silence_s=20.0, start_timeout_s=60.0)
    managed.record_launch(fl.store, launch)
    return launch


def _watcher(fl, store_env):
    return managed.Watcher(fl, store_runs.StoreRuns(store_runs.open_configured()), "ab12cd",
                           instance_env=dict(store_env))


def _metrics(hosts, instance_id, run_id):
    path = hosts.folder(instance_id) / "work" / "out" / "artifacts" / run_id / "metrics.jsonl"
    return [json.loads(line)["training_iteration"] for line in path.read_text().splitlines() if line.strip()]


def _until(condition, timeout_s, what, tick=None):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if tick is not None:
            tick()
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_preempted_instance_is_replaced_and_its_run_resumes_from_the_store(fl, fake, hosts, pin, store_env,
                                                                              progress):
    fake.never_boot_machines.add(1001)   # the best offer's machine: its instance never boots
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

    _until(checkpointed, 120, "share 0's run to mirror a checkpoint past iteration 6", tick=watcher.tick)
    (victim,) = [r for r in fl.store.read().live() if r.share == 0]
    fake.preempt(victim.instance_id)                     # outbid: stopped, its process killed with SIGKILL
    killed_at = _metrics(hosts, victim.instance_id, victim.run_id)[-1]
    final = watcher.watch(time.time() + 180)

    assert [share.status for share in final.shares] == [managed.COMPLETED] * 2, progress.getvalue()
    first, *_ = [r for r in fl.store.read().records.values() if r.share == 0]
    assert "never booted" in fl.store.read().records["rlh-ab12cd-000-1"].note
    assert 1001 in fl.store.read().quarantined() and victim.machine_id in fl.store.read().quarantined()
    resumed = fl.store.read().records[f"rlh-ab12cd-000-{victim.attempts + 1}"]
    assert f"resuming run {victim.run_id} from its newest checkpoint" in progress.getvalue()
    rows = _metrics(hosts, resumed.instance_id, resumed.run_id)
    assert rows == list(range(rows[0], ITERATIONS + 1))          # the curve goes on to the end ...
    assert rows[0] <= killed_at + 1                              # ... without a gap
    redone = killed_at - (rows[0] - 1)
    assert 0 <= redone <= ITERATIONS / 10, (killed_at, rows[0])  # at most a tenth redone
    assert fake.instances == {} and hosts.running() == []        # nothing left running (each ended itself)
    spent = managed.spend(fl.store.read(), "ab12cd", time.time())
    assert spent == pytest.approx(fake.bill(), rel=0.05)         # accounted against the fake API's bill
    print(f"redone {redone}/{ITERATIONS}; spend ${spent:.5f} against the bill ${fake.bill():.5f}")
