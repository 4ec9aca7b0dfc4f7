"""The onstart script: valid bash (bash -n, shellcheck), and it really runs: pinned checkout, run, checksums."""

import hashlib
import os
import pathlib
import shutil
import subprocess

import pytest

from rl.devops.vast import bootstrap, durability, redact
from rl.devops.vast.testing import repos

TOKEN = "ghp_" + "t0k3n" * 6
B2_KEY = "K005" + "made-up-b2-key" * 2  # shaped like a B2 application key, never a real one


def _repo(path: pathlib.Path) -> str:
    path.mkdir()
    repos.git("init", "-q", cwd=path)
    (path / "BUILD").write_text("# experiment\n")
    repos.git("add", "BUILD", cwd=path)
    repos.git("commit", "-q", "-m", "first", cwd=path)
    first = repos.git("rev-parse", "HEAD", cwd=path)
    (path / "BUILD").write_text("# later\n")
    repos.git("commit", "-q", "-am", "second", cwd=path)
    return first  # pin the older commit: the checkout must not take the branch tip


# The pins name https:// remotes; git fetches them from local folders (url.<folder>.insteadOf in _run).
REMOTE = "https://git.example.com/"


def _pin(name, commit):
    return bootstrap.GitPin(REMOTE + name, commit)


def _plan(tmp_path, **fields):
    defaults = {"repo": _pin("src", "a" * 40), "workdir": str(tmp_path / "work")}
    return bootstrap.Bootstrap(**{**defaults, **fields})


JOB = bootstrap.Job(
    target="//experiments/mess3:reward_only",
    seed=3,
    run_id="20250102T030405Z-ab12cd-000",
    extra_args=("--smoke", "a b; rm -rf /"),
)

# Stands in for `bazel run`: records its argv and writes results and artifacts where the harness would.
_FAKE_BAZEL = """#!/bin/bash
printf '%s\\n' "$@" > "$STUB_LOG"
echo "${RL_HARNESS_LOCAL_PATH-unset}" > "$STUB_LOG.library"
echo "${RLH_GIT_TOKEN-unset} ${GIT_ASKPASS-unset}" > "$STUB_LOG.token"
echo "a recipe that prints its key: ${B2_APPLICATION_KEY-unset}"
while [ $# -gt 0 ]; do
  case "$1" in
    --run-id) run_id=$2; shift ;;
    --results-dir) results=$2; shift ;;
    --artifacts-dir) artifacts=$2; shift ;;
  esac
  shift
done
mkdir -p "$results/$run_id" "$artifacts/$run_id/checkpoints"
echo '{"status": "completed"}' > "$results/$run_id/run_manifest.json"
echo '{"iteration": 1}' > "$artifacts/$run_id/metrics.jsonl"
head -c 1000 /dev/zero > "$artifacts/$run_id/checkpoints/final.pt"
exit "${STUB_EXIT:-0}"
"""


def _run(tmp_path, plan, *, exit_code=0):
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "bazel").write_text(_FAKE_BAZEL)
    (stubs / "apt-get").write_text("#!/bin/sh\necho 'apt-get must not run: every tool is present' >&2\nexit 9\n")
    for tool in ("rsync", "zip", "curl", "python3.11"):  # what the script checks for; git is real
        (stubs / tool).write_text("#!/bin/sh\nexit 0\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    script = tmp_path / "onstart.sh"
    script.write_text(bootstrap.render(plan, JOB))
    env = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "STUB_LOG": str(tmp_path / "argv"),
        "STUB_EXIT": str(exit_code),
        bootstrap.GIT_TOKEN_ENV: TOKEN,
        "B2_APPLICATION_KEY": B2_KEY,
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{tmp_path}/.insteadOf",
        "GIT_CONFIG_VALUE_0": REMOTE,
    }
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False)
    # The log goes to PID 1's stdout when writable (the container log), else to stdout; always to this file.
    log = pathlib.Path(plan.out_dir()) / "vast" / JOB.run_id / "bootstrap.log"
    return result.returncode, log.read_text() + result.stderr


def test_what_the_run_prints_reaches_the_log_with_its_secrets_masked(tmp_path):
    code, log = _run(tmp_path, _plan(tmp_path, repo=_pin("src", _repo(tmp_path / "src"))))
    assert code == 0, log
    assert "a recipe that prints its key: [REDACTED]" in log and B2_KEY not in log


def test_the_script_is_valid_bash():
    plan = bootstrap.Bootstrap(
        repo=bootstrap.GitPin("https://example.com/r.git", "a" * 40),
        library=bootstrap.GitPin("https://example.com/l.git", "b" * 40),
        upload_artifacts=True,
    )
    script = bootstrap.render(plan, JOB)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@pytest.mark.skipif(
    shutil.which("shellcheck") is None,
    reason="shellcheck is not installed (apt-get install -y shellcheck); bash -n still ran",
)
@pytest.mark.parametrize("library", [False, True])
def test_the_script_passes_shellcheck(library):
    fields = (
        {"library": bootstrap.GitPin("https://example.com/l.git", "b" * 40), "upload_artifacts": True}
        if library
        else {}
    )
    plan = bootstrap.Bootstrap(repo=bootstrap.GitPin("https://example.com/r.git", "a" * 40), **fields)
    result = subprocess.run(
        ["shellcheck", "--shell=bash", "-"],
        input=bootstrap.render(plan, JOB),
        text=True,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout


def test_it_checks_out_the_pin_runs_the_target_and_lists_every_output(tmp_path):
    commit = _repo(tmp_path / "src")
    library_commit = _repo(tmp_path / "lib")
    plan = _plan(tmp_path, repo=_pin("src", commit), library=_pin("lib", library_commit), upload_artifacts=True)
    code, log = _run(tmp_path, plan)
    assert code == 0, log
    assert [line.split()[1] for line in log.splitlines() if line.startswith("RLH_PHASE")] == [
        "install",
        "checkout",
        "environment",
        "run",
    ]
    assert bootstrap.parse_done(log) == 0
    assert repos.git("rev-parse", "HEAD", cwd=tmp_path / "work" / "repo") == commit
    assert repos.git("rev-parse", "HEAD", cwd=tmp_path / "work" / "library") == library_commit
    # The build takes the library from the checkout the documented way, so its rule records it in build.library.
    assert (tmp_path / "argv.library").read_text() == f"{tmp_path}/work/library\n"
    out = tmp_path / "work" / "out"
    assert (tmp_path / "argv").read_text().splitlines() == [
        "run",
        bootstrap.CUDA_LOCK_FLAG,
        "//experiments/mess3:reward_only",
        "--",
        "--seed",
        "3",
        "--run-id",
        JOB.run_id,
        "--results-dir",
        f"{out}/results",
        "--artifacts-dir",
        f"{out}/artifacts",
        "--upload-artifacts",
        "--smoke",
        "a b; rm -rf /",
    ]
    sums = durability.parse_checksums((out / "vast" / JOB.run_id / "SHA256SUMS").read_text())
    assert sorted(sums) == [
        f"artifacts/{JOB.run_id}/checkpoints/final.pt",
        f"artifacts/{JOB.run_id}/metrics.jsonl",
        f"results/{JOB.run_id}/run_manifest.json",
    ]
    assert sums[f"artifacts/{JOB.run_id}/checkpoints/final.pt"] == hashlib.sha256(b"\0" * 1000).hexdigest()
    # The token reached git through the askpass helper (it read it from the environment), then went away:
    # the build and the run see neither it nor the helper.
    assert not (tmp_path / "work" / "git-askpass").exists()
    assert (tmp_path / "argv.token").read_text() == "unset unset\n"
    assert TOKEN not in log + (tmp_path / "argv").read_text()


def test_a_failed_run_still_reports_its_exit_code_and_checksums(tmp_path):
    commit = _repo(tmp_path / "src")
    code, log = _run(tmp_path, _plan(tmp_path, repo=_pin("src", commit)), exit_code=3)
    assert code == 3 and bootstrap.parse_done(log) == 3
    assert (tmp_path / "argv.library").read_text() == "unset\n"  # no library: the experiment repo's own
    assert (tmp_path / "work" / "out" / "vast" / JOB.run_id / "SHA256SUMS").exists()


def test_an_unknown_commit_fails_the_checkout(tmp_path):
    _repo(tmp_path / "src")
    code, log = _run(tmp_path, _plan(tmp_path, repo=_pin("src", "0" * 40)))
    assert code != 0
    assert bootstrap.parse_phase(log) == "checkout" and bootstrap.parse_done(log) == code


def test_no_secret_is_in_the_script():
    plan = bootstrap.Bootstrap(repo=bootstrap.GitPin("https://example.com/r.git", "a" * 40), upload_artifacts=True)
    script = bootstrap.render(plan, JOB)
    assert TOKEN not in script and "B2_APPLICATION_KEY=" not in script
    assert f'"${bootstrap.GIT_TOKEN_ENV}"' in script  # referenced by name only


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: bootstrap.GitPin("https://x/r.git", "main"), "full 40-digit lowercase sha"),
        (lambda: bootstrap.GitPin("https://user:pw@x/r.git", "a" * 40), "carries credentials"),
        (lambda: bootstrap.GitPin("HTTPS://ghp_token@x/r.git", "a" * 40), "carries credentials"),
        (lambda: bootstrap.GitPin("git+ssh://user:pw@x/r.git", "a" * 40), "carries credentials"),
        (lambda: bootstrap.Job("experiments/x:y", 0, "r1"), "not a Bazel label"),
        (lambda: bootstrap.Job("//x:y", -1, "r1"), "must be >= 0"),
        (lambda: bootstrap.Job("//x:y", 0, "../r"), "run id"),
        (lambda: bootstrap.Bootstrap(repo=bootstrap.GitPin("https://x/r", "a" * 40), max_hours=0), "max_hours"),
        # A value that ends in a newline, or a remote git would read as an option or a local transport.
        (lambda: bootstrap.GitPin("https://x/r.git", "a" * 40 + "\n"), "full 40-digit lowercase sha"),
        (lambda: bootstrap.Job("//x:y\n", 0, "r1"), "not a Bazel label"),
        (lambda: bootstrap.GitPin("--upload-pack=touch /tmp/pwned", "a" * 40), "not an https://, ssh://"),
        (lambda: bootstrap.GitPin("ext::sh -c touch% /tmp/pwned", "a" * 40), "not an https://, ssh://"),
        (lambda: bootstrap.GitPin("/home/me/repo", "a" * 40), "not an https://, ssh://"),
        (lambda: bootstrap.GitPin("file:///home/me/repo", "a" * 40), "not an https://, ssh://"),
        (lambda: bootstrap.GitPin("git@host:-oProxyCommand=x", "a" * 40), "not an https://, ssh://"),
    ],
)
def test_bad_input_names_the_fix(build, message):
    with pytest.raises(redact.DevopsError, match=message):
        build()


def test_log_markers_are_parsed():
    log = "RLH_PHASE install x\nRLH_PHASE run y\nnoise\nRLH_DONE exit_code=0 run_id=r\n"
    assert bootstrap.parse_phase(log) == "run" and bootstrap.parse_done(log) == 0
    assert bootstrap.parse_done("RLH_PHASE run y\n") is None and bootstrap.parse_phase("") is None


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/me/r.git",
        "ssh://git@github.com/me/r.git",
        "ssh://github.com:22/me/r",
        "git@github.com:me/r.git",
    ],
)
def test_the_usual_remotes_are_accepted(url):
    assert bootstrap.GitPin(url, "a" * 40).url == url


def test_every_value_reaches_the_script_quoted_and_the_url_after_a_double_dash():
    plan = bootstrap.Bootstrap(
        repo=bootstrap.GitPin("https://x/r", "a" * 40), library=bootstrap.GitPin("git@x:lib", "b" * 40)
    )
    script = bootstrap.render(plan, JOB)
    assert f"checkout https://x/r {'a' * 40} " in script and f"checkout git@x:lib {'b' * 40} " in script
    assert script.count('fetch -q --depth 1 -- "$url"') == 1 and script.count('fetch -q -- "$url"') == 1
