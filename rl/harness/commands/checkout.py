"""A recorded commit checked out in a scratch `git worktree`, built there with Bazel, its binary run.

    worktree = checkout.scratch_worktree(repo_root)             # one fixed folder per repository (and purpose)
    checkout.check_out(repo_root, commit, f"run {run_id}", worktree)   # CheckoutError when the commit is missing
    identity = checkout.build(worktree, "//rl/harness:rl-harness")     # its build_info JSON
    status, stopped_by = checkout.run_forwarding_signals(
        [*checkout.bazel(worktree), "run", *checkout.python_override(worktree), "--", target, *arguments],
        cwd=worktree, env=checkout.child_environment())
    checkout.release(repo_root, worktree)                       # stops its Bazel server, unregisters the worktree

`reproduce` rebuilds a run this way, and `study --resume <id> --seeds` runs a study's new seeds at its commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

from absl import logging

from rl.harness import env_vars
from rl.harness.errors import UsageError
from rl.harness.run import provenance, records


class CheckoutError(UsageError):
    """The commit cannot be checked out or built here; one line naming the problem and the fix (exit 2)."""


def _run(command: list[str], cwd: str, what: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, **kwargs, check=False)
    if done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise CheckoutError(f"{what} failed: {detail[-1] if detail else f'exit {done.returncode}'}")
    return done


def scratch_worktree(repo_root: str, purpose: str = "") -> str:
    """One fixed path per repository and `purpose`: Bazel keys its output base (and venv) on the path, so they
    survive between uses although the worktree itself is removed after each (`release`)."""
    base = env_vars.reproduce_scratch_dir()
    name = hashlib.sha256(repo_root.encode()).hexdigest()[:12]
    return os.path.join(base, f"{name}-{purpose}" if purpose else name)


def check_out(repo_root: str, commit: str, owner: str, worktree: str) -> None:
    """`worktree` at `commit` (detached, clean); CheckoutError naming `owner` (e.g. "run <id>") when the repository
    lacks the commit."""
    if (
        subprocess.run(
            ["git", "-C", repo_root, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, check=False
        ).returncode
        != 0
    ):
        raise CheckoutError(
            f"commit {commit} of {owner} is not in {repo_root}; fetch it"
            f" (`git fetch origin {commit}`) or work in a clone that has it"
        )
    if os.path.isdir(worktree):
        subprocess.run(
            ["git", "-C", repo_root, "worktree", "remove", "--force", worktree], capture_output=True, check=False
        )
    if os.path.lexists(worktree):  # left by an interrupted use, or not a worktree: only a scratch copy
        logging.warning("replacing the stale scratch folder %s", worktree)
        shutil.rmtree(worktree) if os.path.isdir(worktree) and not os.path.islink(worktree) else os.remove(worktree)
    subprocess.run(["git", "-C", repo_root, "worktree", "prune"], capture_output=True, check=False)
    os.makedirs(os.path.dirname(worktree), exist_ok=True)
    _run(
        ["git", "-C", repo_root, "worktree", "add", "--detach", "--force", worktree, commit],
        repo_root,
        f"creating a scratch worktree at {worktree}",
    )


def release(repo_root: str, worktree: str) -> None:
    """Stops the Bazel server started in `worktree` and unregisters the worktree.

    The scratch folder's Bazel output base (keyed on its path) is kept, so the next use of the same
    path reuses its cache.
    """
    if os.path.isdir(worktree):
        try:
            subprocess.run([*bazel(worktree), "shutdown"], cwd=worktree, capture_output=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:  # no Bazel there, so no server either; or a hung one
            logging.warning("could not stop the Bazel server of %s (%s)", worktree, error)
    subprocess.run(
        ["git", "-C", repo_root, "worktree", "remove", "--force", worktree], capture_output=True, check=False
    )


def _target_path(target: str) -> tuple[str, str]:
    package, _, name = target.lstrip("/").partition(":")
    return package, name


def python_override(worktree: str) -> list[str]:
    """Reuse this process's venv repository when the worktree's lock is the one it was built from.

    Saves building a 2 GB venv per worktree (minutes); the identity it carries is the same.
    """
    repository = pathlib.Path(sys.prefix).parent
    identity_file = repository / "identity.json"
    lock = pathlib.Path(worktree, "requirements_lock.txt")
    if not identity_file.exists() or not lock.exists():
        return []
    identity = json.loads(identity_file.read_text())
    if identity.get("lock_sha256") != provenance.file_sha256(str(lock)):
        return []
    return [f"--override_repository=rl_python={repository}"]


def bazel(worktree: str) -> list[str]:
    """The Bazel to run in `worktree`: $RL_HARNESS_BAZEL, else its `bazelw`, else `bazel`."""
    explicit = env_vars.bazel_command()
    if explicit:
        return explicit
    wrapper = os.path.join(worktree, "bazelw")
    return [wrapper] if os.path.exists(wrapper) else ["bazel"]


def build(worktree: str, target: str) -> dict:
    """Builds `target` in `worktree`; returns its build identity (the binary's build_info JSON).

    `--` ends Bazel's options: the recorded target (a checked label) is only ever read as a target.
    """
    _run(
        [*bazel(worktree), "build", *python_override(worktree), "--", target],
        worktree,
        f"bazel build {target}",
        env=child_environment(),
    )
    package, name = _target_path(target)
    return records.read_json(
        os.path.join(worktree, "bazel-bin", package, f"{name}.build_info.json"), "rebuilt build info"
    )


# This binary's runfiles, workspace and build identity must not leak into the rebuilt one.
_LEAKING_ENVIRONMENT = (
    "BUILD_WORKSPACE_DIRECTORY",
    "BUILD_WORKING_DIRECTORY",
    "RUNFILES_DIR",
    "RUNFILES_MANIFEST_FILE",
    "JAVA_RUNFILES",
    "PYTHON_RUNFILES",
    "PYTHONPATH",
    "RL_BUILD_INFO",
    "RL_BUILD_STAMP",
)


def child_environment(cpu_share: int | None = None) -> dict:
    """This process's environment without what would leak into the rebuilt binary; `cpu_share` as $RL_HARNESS_CPUS."""
    environment = {key: value for key, value in os.environ.items() if key not in _LEAKING_ENVIRONMENT}
    if cpu_share is not None:
        environment[env_vars.CPU_SHARE_ENV] = str(cpu_share)
    return environment


def run_forwarding_signals(command: list[str], cwd: str, env: dict) -> tuple[int, str | None]:
    """(exit status, the name of the signal that stopped it or None) of `command`.

    It runs in its own session, so a terminal's Ctrl-C reaches it once, through this process: a
    SIGINT or SIGTERM here is forwarded to it (a run finishes its iteration, checkpoints and
    records itself interrupted) and waited for; a second one is forwarded too (it stops at once).
    """
    child = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True)
    received = []

    def forward(number, frame):
        received.append(signal.Signals(number).name)
        child.send_signal(number)

    previous = {number: signal.signal(number, forward) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait(), (received[0] if received else None)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
