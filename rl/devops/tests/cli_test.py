"""The CLI against the fake API: the commands, progress output, exit codes, and redaction on every error path."""

import pytest

from rl.devops.vast import api, cli, fleet
from rl.devops.vast.testing import fake_api, repos
from rl.devops.vast.testing.leaks import assert_no_secret

# Stand-ins for the commits of the fixture's repositories, which `up` checks the instances can fetch.
COMMIT = "<pushed commit>"
LIBRARY_COMMIT = "<pushed library commit>"


def _repository(path):
    """A repository with one commit, at `path`; returns the commit."""
    path.mkdir(parents=True)
    repos.git("init", "-q", cwd=path)
    repos.git("commit", "-q", "--allow-empty", "-m", "first", cwd=path)
    return repos.git("rev-parse", "HEAD", cwd=path)


@pytest.fixture
def pushed(tmp_path, monkeypatch):
    """https://example.com/<name> served from local repositories; {stand-in: commit}."""
    commits = {
        COMMIT: _repository(tmp_path / "git" / "r.git"),
        LIBRARY_COMMIT: _repository(tmp_path / "git" / "rl-harness.git"),
    }
    for name, value in (
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", f"url.{tmp_path / 'git'}/.insteadOf"),
        ("GIT_CONFIG_VALUE_0", "https://example.com/"),
    ):
        monkeypatch.setenv(name, value)
    return commits


@pytest.fixture
def run(fake, api_key, tmp_path, monkeypatch, capsys, pushed):
    """cli.main with the fake server, a temporary state dir and fast timings; returns (exit code, output)."""
    monkeypatch.setenv(api.API_KEY_ENV, api_key)
    monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(tmp_path))

    def run_cli(*argv, debug=False):
        argv = [pushed.get(argument, argument) for argument in argv]
        code = cli.main(
            [
                "--server-url",
                fake.url,
                "--state-dir",
                "state",
                "--request-timeout",
                "1",
                "--retries",
                "1",
                "--poll-interval",
                "0.02",
                *(["--debug"] if debug else []),
                *argv,
            ]
        )
        out, err = capsys.readouterr()
        return code, out + err

    return run_cli


def _up(*extra):
    return (
        "up",
        "--repo",
        "https://example.com/r.git",
        "--commit",
        COMMIT,
        "--target",
        "//experiments/x:y",
        "--seeds",
        "0-1",
        "--hours",
        "2",
        "--boot-timeout",
        "0.4",
        *extra,
    )


def test_search_prints_the_ranking(run):
    code, output = run("search", "--show", "2")
    assert code == 0
    lines = output.splitlines()
    assert lines[0] == "4 offers, 4 pass the gates"
    assert lines[1].startswith("offer 1  machine 1001  1x RTX 4090  $0.350/h  reliability 0.995")


def test_up_without_yes_only_plans(run, fake):
    code, output = run(*_up())
    assert code == 0 and "nothing launched: add --yes" in output
    assert "2 instances at $0.750/h together; 2 h expected: about $1.50" in output
    assert fake.calls("PUT", r"/asks/") == []


def test_a_budget_below_the_estimate_refuses(run, fake):
    code, output = run(*_up("--budget", "1.00", "--yes"))
    assert code == 1 and "exceeds --budget $1.00" in output and fake.calls("PUT", r"/asks/") == []


def test_up_status_logs_destroy(run, fake, tmp_path):
    code, output = run(*_up("--yes", "--", "--smoke"))
    assert code == 0, output
    assert "search: 4 offers, 4 pass the gates" in output and "is running" in output  # progress lines
    labels = [line.split()[0] for line in output.splitlines() if line.startswith("rlh-")]
    assert len(labels) == 2 and all(" --smoke\n" in r.body["onstart"] for r in fake.calls("PUT", r"/asks/"))
    assert (tmp_path / "state" / "state.json").exists()  # relative to the caller
    (first,) = [i for i, row in fake.instances.items() if row["label"] == labels[0]]
    fake.set_logs(first, "RLH_PHASE run now\nstep 1\n")
    code, output = run("status")
    assert code == 0 and "live: 2 instances" in output and "running/running run" in output
    code, output = run("logs", labels[0], "--tail", "1")
    assert code == 0 and output == "step 1\n"
    launch_id = labels[0].split("-")[1]
    code, output = run("destroy", "--launch", launch_id)
    assert code == cli.EXIT_KEPT and "has not finished" in output and len(fake.instances) == 2
    code, output = run("destroy", "--launch", launch_id, "--discard-results")
    assert code == 0 and fake.instances == {}


def test_a_library_pin_is_checked_out_and_replaces_the_workspace_one(run, fake, pushed):
    code, output = run(
        *_up("--yes", "--library", "https://example.com/rl-harness.git", "--library-commit", LIBRARY_COMMIT)
    )
    assert code == 0, output
    onstart = fake.calls("PUT", r"/asks/")[0].body["onstart"]
    assert f'checkout https://example.com/rl-harness.git {pushed[LIBRARY_COMMIT]} "$WORK/library"' in onstart
    assert 'export RL_HARNESS_LOCAL_PATH="$WORK/library"' in onstart and "--override_repository" not in onstart


def test_quarantine_commands(run):
    code, output = run("quarantine", "add", "1234", "--hours", "2", "--reason", "CUDA errors")
    assert code == 0 and output.startswith("1234  until ") and "CUDA errors" in output
    code, output = run("quarantine", "remove", "1234")
    assert code == 0 and output == ""
    code, output = run("quarantine", "remove", "1234")
    assert code == 1 and "machine 1234 is not quarantined" in output


def test_reap_lists_then_destroys(run, fake, account):
    fake.offers[9] = fake_api.offer(9)
    account.create_instance(9, image="i", disk_gb=10, label="rlh-zz9999-000-1", onstart="", env={})
    code, output = run("reap")
    assert code == 0 and "1 orphans; run `reap --yes`" in output and len(fake.instances) == 1
    code, output = run("reap", "--yes")
    assert code == 0 and ": destroyed" in output and fake.instances == {}


def _raise_unexpected(api_key):
    def status(self, **kwargs):
        raise ValueError(f"unexpected failure near {api_key}")

    return status


ERROR_PATHS = {
    "search: server echoes the key": (("search",), [("POST", r"/bundles/", fake_api.Fault.echo_credentials())]),
    "up: every create fails": (_up("--yes"), [("PUT", r"/asks/", fake_api.Fault.echo_credentials())]),
    "up: list after a failed create fails": (
        _up("--yes"),
        [("PUT", r"/asks/", fake_api.Fault.echo_credentials()), ("GET", r"/v1/instances/", fake_api.Fault.status(500))],
    ),
    "up: boot polling fails": (_up("--yes"), [("GET", r"/v0/instances/", fake_api.Fault.echo_credentials())]),
    "status: timeout": (("status",), [("GET", r"/v1/instances/", fake_api.Fault.delay(1.5))]),
    "reap: server echoes the key": (("reap", "--yes"), [("GET", r"/v1/instances/", fake_api.Fault.echo_credentials())]),
    "quarantine: bad hours": (("quarantine", "add", "1", "--hours", "-1", "--reason", "x"), []),
    "logs: unknown label": (("logs", "rlh-none"), []),
}


@pytest.mark.parametrize("name", sorted(ERROR_PATHS))
def test_every_error_path_is_redacted(run, fake, api_key, tmp_path, name):
    argv, faults = ERROR_PATHS[name]
    for method, path, fault in faults:
        fake.add_fault(method, path, fault, times=100)
    code, output = run(*argv, debug=True)
    assert code != 0, output
    assert "error: " in output or "failed" in output or "never booted" in output
    assert_no_secret(api_key, output, *[p for p in (tmp_path / "state").glob("*") if p.is_file()])


def test_an_unexpected_exception_is_redacted_with_its_traceback(run, api_key, monkeypatch):
    monkeypatch.setattr(fleet.Fleet, "status", _raise_unexpected(api_key))
    code, output = run("status", debug=True)
    assert code == 1 and "error: ValueError: unexpected failure near [REDACTED]" in output
    assert "Traceback" in output
    assert_no_secret(api_key, output)


def test_the_destroy_and_logs_paths_are_redacted(run, fake, api_key, tmp_path):
    code, output = run(*_up("--yes"))
    assert code == 0, output
    label = next(line.split()[0] for line in output.splitlines() if line.startswith("rlh-"))
    fake.add_fault("PUT", r"/request_logs/", fake_api.Fault.echo_credentials(), times=100)
    fake.add_fault("GET", r"/v0/instances/", fake_api.Fault.echo_credentials(), times=100)
    for argv in (("logs", label), ("destroy", label), ("status",)):
        code, output = run(*argv, debug=True)
        assert code != 0 or "error" in output, output
        assert_no_secret(api_key, output, tmp_path / "state" / "state.json")


def test_a_wrong_key_fails_without_showing_it(run, monkeypatch):
    wrong = "wrongkey-" + "9" * 30
    monkeypatch.setenv(api.API_KEY_ENV, wrong)
    code, output = run("status")
    assert code == 1 and "401" in output
    assert_no_secret(wrong, output)
