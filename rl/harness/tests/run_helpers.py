"""Helpers shared by the harness tests: start the CLI in a subprocess, wait for records."""

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from absl import logging as absl_logging

from rl.harness.run import records
from rl.harness.run.status import process_start_ticks
from rl.harness.training import reaper

FAKE = "rl.harness.tests.fake_recipe"
PPO = "rl.harness.tests.ppo_cartpole_recipe"


def child_env(**overrides):
    """The test's environment, with its import path, one torch thread, and `overrides`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update({key: str(value) for key, value in overrides.items()})
    return env


def start_cli(args, module="rl.harness.commands.cli", cwd=None, **env):
    """`python -m rl.harness.commands.cli ARGS` (or another `module`) in its own session (its Ray processes die with the
    group), in folder `cwd` (default: this one), which `-m` puts first on the import path."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *map(str, args)],
        env=child_env(**env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@contextlib.contextmanager
def absl_verbosity(level):
    """absl's verbosity at `level` while entered: a run keeps the verbosity it finds, which an earlier test may
    have left at ERROR."""
    previous = absl_logging.get_verbosity()
    absl_logging.set_verbosity(level)
    try:
        yield
    finally:
        absl_logging.set_verbosity(previous)


def run_fake(results_root, artifacts_root, *args) -> int:
    """The fake recipe through the CLI in this process, into the given roots; its exit status."""
    from rl.harness.commands import cli  # the entry point, only for the tests that run it in-process

    return cli.main(
        ["rl-harness", FAKE, "--results-dir", str(results_root), "--artifacts-dir", str(artifacts_root), *args]
    )


def adopt_study(results_root, artifacts_root, study, study_id, *groups) -> int:
    """`study <study> --runs <groups>` in this process: runs already in the roots adopted as one study; its status."""
    from rl.harness.commands import cli

    return cli.main(
        [
            "rl-harness",
            "study",
            study,
            "--results-dir",
            str(results_root),
            "--artifacts-dir",
            str(artifacts_root),
            "--study-id",
            study_id,
            "--runs",
            *groups,
        ]
    )


def one_error_line(capture) -> str:
    """The one line a refused command printed on stderr (`capture`: pytest's capsys or capfd)."""
    lines = [line for line in capture.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def run_cli(args, timeout=120, module="rl.harness.commands.cli", cwd=None, **env):
    process = start_cli(args, module, cwd, **env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        stop_group(process)
    return process.returncode, stdout, stderr


def run_until(args, ready, signal_number, what, timeout=240, **env):
    """Starts the CLI, waits until `ready()` (e.g. the first metrics row), sends `signal_number`.

    Returns (exit status, stderr) once the process ended.
    """
    process = start_cli(args, **env)
    try:
        wait_for(ready, timeout, what)
        process.send_signal(signal_number)
        _, stderr = process.communicate(timeout=timeout)
    finally:
        stop_group(process)
    return process.returncode, stderr


def stop_group(process):
    """Kills what is left of a CLI subprocess's session (e.g. Ray workers after a SIGKILL)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.returncode is None:
        process.wait()


def kill_with_descendants(process, timeout, what):
    """SIGKILL to a CLI subprocess; waits until every process it had started (Ray's, the runs') ended, as `what`."""
    noted = {pid: process_start_ticks(pid) for pid in reaper.descendants(process.pid)}
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        wait_for(lambda: not [pid for pid, ticks in noted.items() if process_start_ticks(pid) == ticks], timeout, what)
    finally:
        for pid, ticks in noted.items():
            if process_start_ticks(pid) == ticks:
                os.kill(pid, signal.SIGKILL)
        stop_group(process)


def store_roots(folder) -> list:
    """`--results-dir` and `--artifacts-dir` under `folder` (r/ and a/): one machine's checkout in the store tests."""
    return ["--results-dir", folder / "r", "--artifacts-dir", folder / "a"]


def resume_fake_from(parent: str, folder, **env):
    """`rl-harness <fake recipe> --run-id resumed --resume-from <parent>` into `store_roots(folder)`, no upload:
    (exit status, stdout, stderr)."""
    return run_cli(
        [FAKE, "--run-id", "resumed", "--resume-from", parent, "--no-upload-artifacts", *store_roots(folder)], **env
    )


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def only_run_dir(root):
    """The single run folder under a results or artifacts root (smoke runs included)."""
    folders = [path for path in pathlib.Path(root).glob("*") if path.name != records.SMOKE_DIR]
    folders += list(pathlib.Path(root).glob(f"{records.SMOKE_DIR}/*"))
    assert len(folders) == 1, folders
    return folders[0]


def metrics_rows(artifacts_root):
    """Complete metrics rows of the single run under `artifacts_root` ([] before it starts)."""
    while True:
        try:
            folders = list(pathlib.Path(artifacts_root).glob(f"**/{records.METRICS_FILE}"))
            break
        except FileNotFoundError:  # the run renamed a folder (a finished checkpoint) under the walk
            continue
    return records.read_json_lines(str(folders[0])) if folders else []


def manifest(results_dir):
    return json.loads((pathlib.Path(results_dir) / records.MANIFEST_FILE).read_text())


def git(folder, *args) -> str:
    """`git -C folder ARGS`'s output; CalledProcessError if it fails."""
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout


def committed_repo(folder: pathlib.Path, files: dict) -> pathlib.Path:
    """A new git repository at `folder` whose first commit holds `files` (name -> text)."""
    folder.mkdir()
    git(folder, "init", "-q")
    git(folder, "config", "user.email", "t@example.com")
    git(folder, "config", "user.name", "t")
    for name, text in files.items():
        (folder / name).write_text(text)
    git(folder, "add", ".")
    git(folder, "commit", "-q", "-m", "first")
    return folder
