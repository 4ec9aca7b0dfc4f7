"""Every environment variable the harness reads, and the one reader of each (nothing else reads `os.environ`).

    from rl.harness import env_vars

    env_vars.heartbeat_seconds()            # $RL_HARNESS_HEARTBEAT_S, default 10 s; EnvVarError naming the fix
    env_vars.patch_cap_bytes()              # $RL_HARNESS_PATCH_CAP_BYTES, default 2 MiB
    env_vars.workspace_directory()          # $BUILD_WORKSPACE_DIRECTORY under `bazel run`, else None
    env_vars.store_variables()              # the store's variables that are set (B2's too): {name: value}
    env_vars.secret_variables()             # {name: value} of every credential-shaped variable (redacted in records)

Each reader takes an optional mapping (tests pass a dict) and defaults to the process environment.
The variables that configure a child process (torch threads, Tune's SIGINT switch) are written by
their owners; this module only reads.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping

from rl.harness.errors import UsageError


class EnvVarError(UsageError, ValueError):
    """An environment variable the harness reads holds a value it cannot use: the message names it and the fix."""


# -- the run's records ------------------------------------------------------------------------
HEARTBEAT_ENV = "RL_HARNESS_HEARTBEAT_S"
DEFAULT_HEARTBEAT_S = 10.0
# A patch lands in the committed results/; beyond this its untracked files are left out (and named).
PATCH_CAP_ENV = "RL_HARNESS_PATCH_CAP_BYTES"
DEFAULT_PATCH_CAP_BYTES = 2 << 20

# -- the build identity that rl_py_binary's launcher exports ------------------------------------
BUILD_INFO_ENV = "RL_BUILD_INFO"
BUILD_STAMP_ENV = "RL_BUILD_STAMP"
# Set by `bazel run`: the source root, and the folder the user typed the command in.
WORKSPACE_ENV = "BUILD_WORKSPACE_DIRECTORY"
WORKING_DIRECTORY_ENV = "BUILD_WORKING_DIRECTORY"

# -- Ray clusters ------------------------------------------------------------------------------
RAY_CONNECT_TIMEOUT_ENV = "RL_HARNESS_RAY_CONNECT_TIMEOUT_S"
# A bad address must fail well inside 30 s: the probe's deadline, TCP check included.
DEFAULT_RAY_CONNECT_TIMEOUT_S = 25.0

# Token authentication of Ray clusters (Ray's own variables): the local clusters the harness starts
# require a token (training/cluster.py), and so may a --ray-address cluster (docs/cluster.md).
RAY_AUTH_MODE_ENV = "RAY_AUTH_MODE"
RAY_AUTH_TOKEN_ENV = "RAY_AUTH_TOKEN"

# CPUs one run may use, below what the machine grants it: a study's trial sets its share, so a
# run does not size its Ray cluster and env runners by the whole machine that others share.
CPU_SHARE_ENV = "RL_HARNESS_CPUS"
# A cluster node's own folder, set in the environment that starts the node (`ray start`): a study
# member that runs on the node, with a store, writes its results and artifacts below it, never to
# the driver's roots (docs/cluster.md).
NODE_FOLDER_ENV = "RL_HARNESS_NODE_FOLDER"
# The file a study member's output goes to, set by its trial: the member's run mirrors it with its own
# files (as artifacts/<run-id>/member.log), so a log written on another node reaches the store.
MEMBER_LOG_ENV = "RL_HARNESS_MEMBER_LOG"

# -- the numeric platform: which kernels torch, MKL, oneDNN, OpenBLAS and numpy dispatch to -------
# Each library reads its variable once, when it loads (numpy, OpenBLAS) or on first use (ATen,
# MKL, oneDNN): the `cpu-portable` profile sets them before the run's process imports either.
KERNEL_DISPATCH_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
    "NPY_ENABLE_CPU_FEATURES",
    "CUBLAS_WORKSPACE_CONFIG",
)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

# -- reproduce ---------------------------------------------------------------------------------
REPRODUCE_SCRATCH_ENV = "RL_HARNESS_REPRODUCE_DIR"
DEFAULT_REPRODUCE_SCRATCH = os.path.join("~", ".cache", "rl-harness", "reproduce")
BAZEL_ENV = "RL_HARNESS_BAZEL"
# Set by `study --resume` for the study's commit's own build, which then refuses what still differs
# rather than checking its commit out again (commands/study_commit.py).
AT_STUDY_COMMIT_ENV = "RL_HARNESS_AT_STUDY_COMMIT"

# -- Backblaze B2 ------------------------------------------------------------------------------
B2_KEY_ID_ENV = "B2_APPLICATION_KEY_ID"
B2_KEY_ENV = "B2_APPLICATION_KEY"
B2_BUCKET_ENV = "RL_HARNESS_B2_BUCKET"
B2_PREFIX_ENV = "RL_HARNESS_B2_PREFIX"
B2_CREDENTIALS_FILE_ENV = "RL_HARNESS_B2_CREDENTIALS_FILE"
B2_VARIABLES = (B2_KEY_ID_ENV, B2_KEY_ENV, B2_BUCKET_ENV, B2_PREFIX_ENV, B2_CREDENTIALS_FILE_ENV)

# -- the object store of runs (remote/stores.py): a URL, an S3 endpoint, the key, or a file ------
STORE_ENV = "RL_HARNESS_STORE"  # b2://bucket/prefix or s3://bucket/prefix
STORE_ENDPOINT_ENV = "RL_HARNESS_STORE_ENDPOINT"  # s3 only, e.g. http://127.0.0.1:9000
STORE_FILE_ENV = "RL_HARNESS_STORE_FILE"
S3_KEY_ID_ENV = "AWS_ACCESS_KEY_ID"  # the names every S3 client reads
S3_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
# How often a run's mirror looks for what changed, and how long a finished run waits for it to drain.
MIRROR_INTERVAL_ENV = "RL_HARNESS_MIRROR_INTERVAL_S"
DEFAULT_MIRROR_INTERVAL_S = 10.0
MIRROR_DRAIN_ENV = "RL_HARNESS_MIRROR_DRAIN_S"
DEFAULT_MIRROR_DRAIN_S = 300.0
STORE_VARIABLES = (STORE_ENV, STORE_ENDPOINT_ENV, STORE_FILE_ENV, S3_KEY_ID_ENV, S3_KEY_ENV, *B2_VARIABLES)

# -- secrets -----------------------------------------------------------------------------------
# Variables whose values never reach a record or a log line (run/redaction.py masks them): the B2
# key, and anything named like a key, a token, a personal access token, a secret or a password.
SECRET_VARIABLE = re.compile(r"(?i).*(_KEY|_TOKEN|_PAT|SECRET.*|PASSWORD.*|PASSWD.*|CREDENTIAL.*)")
SECRET_VARIABLES = (B2_KEY_ID_ENV, B2_KEY_ENV, S3_KEY_ID_ENV, S3_KEY_ENV)


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def positive_seconds(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """$`name` as a positive number of seconds, `default` if unset; ValueError naming the fix otherwise."""
    value = _environ(environ).get(name)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not seconds > 0:
        raise EnvVarError(f"${name}={value!r} is not a positive number of seconds; unset it or fix it")
    return seconds


def heartbeat_seconds(environ: Mapping[str, str] | None = None) -> float:
    return positive_seconds(HEARTBEAT_ENV, DEFAULT_HEARTBEAT_S, environ)


def ray_connect_timeout_seconds(environ: Mapping[str, str] | None = None) -> float:
    return positive_seconds(RAY_CONNECT_TIMEOUT_ENV, DEFAULT_RAY_CONNECT_TIMEOUT_S, environ)


def mirror_seconds(environ: Mapping[str, str] | None = None) -> tuple[float, float]:
    """($RL_HARNESS_MIRROR_INTERVAL_S, default 10 s, at most 60; $RL_HARNESS_MIRROR_DRAIN_S, default 300 s)."""
    interval_s = positive_seconds(MIRROR_INTERVAL_ENV, DEFAULT_MIRROR_INTERVAL_S, environ)
    if interval_s > 60:
        raise EnvVarError(
            f"${MIRROR_INTERVAL_ENV}={interval_s:g} lets the store fall more than a minute behind; set it to 60 or less"
        )
    return interval_s, positive_seconds(MIRROR_DRAIN_ENV, DEFAULT_MIRROR_DRAIN_S, environ)


def patch_cap_bytes(environ: Mapping[str, str] | None = None) -> int:
    value = _environ(environ).get(PATCH_CAP_ENV, str(DEFAULT_PATCH_CAP_BYTES))
    if not value.isdigit():
        raise EnvVarError(f"${PATCH_CAP_ENV}={value!r} is not a whole number of bytes; unset it or fix it")
    return int(value)


def cpu_share(environ: Mapping[str, str] | None = None) -> int | None:
    """$RL_HARNESS_CPUS as a positive whole number of CPUs, None if unset; EnvVarError naming the fix otherwise."""
    value = _environ(environ).get(CPU_SHARE_ENV)
    if value is None:
        return None
    if not value.isdigit() or int(value) < 1:
        raise EnvVarError(f"${CPU_SHARE_ENV}={value!r} is not a positive whole number of CPUs; unset it or fix it")
    return int(value)


def member_log(environ: Mapping[str, str] | None = None) -> str | None:
    """$RL_HARNESS_MEMBER_LOG: the file this run's output goes to when it is a study's member; None otherwise."""
    return _environ(environ).get(MEMBER_LOG_ENV) or None


def kernel_dispatch_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel-dispatch variables that are set (KERNEL_DISPATCH_VARIABLES): {name: value}."""
    environ = _environ(environ)
    return {name: environ[name] for name in KERNEL_DISPATCH_VARIABLES if name in environ}


def thread_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The thread-count variables that are set (THREAD_VARIABLES): {name: value}."""
    environ = _environ(environ)
    return {name: environ[name] for name in THREAD_VARIABLES if name in environ}


def build_info_path(environ: Mapping[str, str] | None = None) -> str | None:
    return _environ(environ).get(BUILD_INFO_ENV) or None


def build_stamp_path(environ: Mapping[str, str] | None = None) -> str | None:
    return _environ(environ).get(BUILD_STAMP_ENV) or None


def workspace_directory(environ: Mapping[str, str] | None = None) -> str | None:
    """The source root under `bazel run`, else None."""
    return _environ(environ).get(WORKSPACE_ENV) or None


def working_directory(environ: Mapping[str, str] | None = None) -> str:
    """Where the user typed the command: $BUILD_WORKING_DIRECTORY under `bazel run`, else the current folder."""
    return _environ(environ).get(WORKING_DIRECTORY_ENV) or os.getcwd()


def reproduce_scratch_dir(environ: Mapping[str, str] | None = None) -> str:
    return os.path.expanduser(_environ(environ).get(REPRODUCE_SCRATCH_ENV, DEFAULT_REPRODUCE_SCRATCH))


def at_study_commit(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a study's commit's own build, started by `study --resume` from another checkout."""
    return _environ(environ).get(AT_STUDY_COMMIT_ENV) == "1"


def bazel_command(environ: Mapping[str, str] | None = None) -> list[str] | None:
    """$RL_HARNESS_BAZEL split into words (a Bazel to use instead of the worktree's), or None."""
    explicit = _environ(environ).get(BAZEL_ENV)
    return explicit.split() if explicit else None


def store_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The store's variables (B2's included) that are set and not empty, plus $HOME (where the default
    credentials files are)."""
    environ = _environ(environ)
    present = {name: environ[name] for name in STORE_VARIABLES if environ.get(name)}
    if environ.get("HOME"):
        present["HOME"] = environ["HOME"]
    return present


def secret_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name: value} of the set variables that hold secrets: the store's keys and every name `SECRET_VARIABLE` matches
    (`*_KEY`, `*_TOKEN`, `*_PAT`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`)."""
    return {
        name: value
        for name, value in _environ(environ).items()
        if value and (name in SECRET_VARIABLES or SECRET_VARIABLE.fullmatch(name))
    }


def ray_auth(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """($RAY_AUTH_MODE, $RAY_AUTH_TOKEN), each None when unset or empty."""
    environ = _environ(environ)
    return environ.get(RAY_AUTH_MODE_ENV) or None, environ.get(RAY_AUTH_TOKEN_ENV) or None
