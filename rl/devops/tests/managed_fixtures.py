"""Fixtures of the managed launches' tests: the fake API with offers for a few real runs, a pushed commit, fake
instances running the real bootstrap and a real harness run, the command line (the store: conftest's `store_env`).

A test file takes the fixtures into its names, where pytest finds them, and the rest through the module:

    from rl.devops.tests import managed_fixtures as fixtures
    from rl.devops.tests.managed_fixtures import *  # its fixtures (its __all__), which pytest finds by name here
"""

import io
import json
import os
import pathlib
import threading
import time

import pytest

from rl.devops.vast import api, bootstrap, cli, fleet, state, store_runs
from rl.devops.vast.testing import fake_api, fake_hosts, repos
from rl.harness import env_vars

__all__ = [
    "cli_run",
    "fake",
    "fl",
    "git_env",
    "hosts",
    "instance_store_file",
    "pin",
    "progress",
]

REMOTE = "https://git.example.com/"
ITERATIONS = 30
FAST = fleet.FleetConfig(boot_timeout_s=2.0, poll_interval_s=0.2, quarantine_hours=24, log_tail=50)


@pytest.fixture
def fake(api_key):
    """Four good offers (ids 1-4; offer 1 scores best), for as long as a few real runs take."""
    offers_ = [fake_api.offer(i, dph_total=round(0.30 + 0.05 * i, 2)) for i in range(1, 5)]
    with fake_api.FakeVastApi(api_key, offers_, lifetime_s=400, boot_delay_s=0.3) as server:
        yield server


@pytest.fixture
def pin(tmp_path):
    """A pushed commit of an experiment repository, served from a local folder under an https:// name."""
    source = tmp_path / "git" / "src"
    source.mkdir(parents=True)
    repos.git("init", "-q", cwd=source)
    (source / "BUILD").write_text("# experiment\n")
    repos.git("add", "BUILD", cwd=source)
    repos.git("commit", "-q", "-m", "first", cwd=source)
    return bootstrap.GitPin(REMOTE + "src", repos.git("rev-parse", "HEAD", cwd=source))


@pytest.fixture
def git_env(tmp_path):
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{tmp_path / 'git'}/.insteadOf",
        "GIT_CONFIG_VALUE_0": REMOTE,
    }


def runtime_python() -> str:
    """The runtime venv's python (a harness run trains with it; this test runs in the operator's venv)."""
    return json.loads(pathlib.Path(os.environ["RL_RUNTIME_IDENTITY_FILE"]).read_text())["venv_python"]


@pytest.fixture
def hosts(fake, tmp_path, git_env):
    repo_root = pathlib.Path(__file__).resolve().parents[3]
    environment = {
        **git_env,
        "RLH_FAKE_PYTHON": runtime_python(),
        "RLH_FAKE_RECIPE": "rl.harness.tests.fake_recipe",
        "PYTHONPATH": str(repo_root),
        "OMP_NUM_THREADS": "1",
        "FAKE_RECIPE_ITERATIONS": str(ITERATIONS),
        "FAKE_RECIPE_SLEEP_S": "0.5",
        env_vars.MIRROR_INTERVAL_ENV: "0.2",
    }
    running = fake_hosts.FakeHosts(fake, tmp_path / "hosts", workdir=bootstrap.DEFAULT_WORKDIR, environment=environment)
    fake.hosts.append(running)
    yield running
    running.close()


@pytest.fixture
def progress():
    return io.StringIO()


@pytest.fixture
def fl(tmp_path, account, progress):
    return fleet.Fleet(account, state.StateFile(tmp_path / "state"), fleet.Progress(progress), FAST)


def until(condition, timeout_s, what, tick=None):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if tick is not None:
            tick()
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def cli_run(fake, api_key, tmp_path, monkeypatch, capsys, git_env, pin):
    """`up` through cli.main against the fake API, pins fetched from the local repository; returns (exit code,
    output). `cli_run.command(...)` runs any other command so."""
    monkeypatch.setenv(api.API_KEY_ENV, api_key)
    monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(tmp_path))
    for name, value in git_env.items():
        monkeypatch.setenv(name, value)

    def command(*argv):
        code = cli.main(
            [
                "--server-url",
                fake.url,
                "--state-dir",
                "state",
                "--request-timeout",
                "2",
                "--poll-interval",
                "0.05",
                *argv,
            ]
        )
        out, err = capsys.readouterr()
        return code, out + err

    def run_cli(*argv, commit=pin.commit, job=("--target", "//experiments/x:y", "--seeds", "0-2")):
        return command("up", "--repo", pin.url, "--commit", commit, *job, "--hours", "1", "--yes", *argv)

    run_cli.command = command
    return run_cli


@pytest.fixture
def instance_store_file(tmp_path, store_env):
    path = tmp_path / "instances.json"
    path.write_text(
        json.dumps(
            {
                "url": store_env[env_vars.STORE_ENV],
                "endpoint": store_env[env_vars.STORE_ENDPOINT_ENV],
                "key_id": store_env[env_vars.S3_KEY_ID_ENV],
                "key": store_env[env_vars.S3_KEY_ENV],
            }
        )
    )
    path.chmod(0o600)
    return str(path)


def no_store(monkeypatch, tmp_path):
    for name in (env_vars.STORE_ENV, env_vars.STORE_FILE_ENV, env_vars.B2_KEY_ID_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.config/rl-harness/store.json either


def error_line(output):
    (line,) = [line for line in output.splitlines() if line.startswith("error: ")]
    return line


def put_run(run_id, *, status="running", checkpoint=None, error=None, heartbeat_age_s=0.0):
    """A run's manifest in the store, as a run on an instance mirrors it (and its checkpoint's state file)."""
    store = store_runs.open_configured(write=True)
    prefix = f"{store.config.prefix}/x/{run_id}"
    at = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - heartbeat_age_s))
    manifest = {
        "run_id": run_id,
        "status": status,
        "heartbeat": {"at": at},
        "error": {"type": "RuntimeError", "message": error} if error else None,
        "checkpoints": [{"path": f"checkpoints/iter_{checkpoint:06d}", "iteration": checkpoint}] if checkpoint else [],
    }
    store.put_bytes(json.dumps(manifest).encode(), f"{prefix}/results/run_manifest.json")
    if checkpoint:
        store.put_bytes(b"{}", f"{prefix}/artifacts/checkpoints/iter_{checkpoint:06d}/harness_checkpoint.json")


def tick_at_once(watchers, passes=3):
    """`passes` passes of every watcher in `watchers`, each in a thread of its own, all started at once."""
    barrier = threading.Barrier(len(watchers))

    def watch(watcher):
        barrier.wait()
        for _ in range(passes):
            watcher.tick()

    threads = [threading.Thread(target=watch, args=(watcher,)) for watcher in watchers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
