"""Runtime access to the build identity that rl_py_binary bakes into every binary.

    from rl.harness.run import buildinfo

    info = buildinfo.current()
    info.build_hash        # sha256: interpreter + Bazel + lock + first-party sources
    info.git_commit        # set only for binaries built with `--stamp`
    info.library           # {"external": False} here; the pinned revision in a dependent workspace
    info.as_dict()         # what the harness writes into run provenance
    buildinfo.harness_command("runs")   # "./bazelw run //rl/harness:rl-harness -- runs" (python -m ... outside Bazel)

Outside a Bazel binary (plain `python -m ...`, tests) there is no build identity:
`current()` then returns a BuildInfo with `built_with_bazel=False` and says why,
rather than inventing a hash.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Sequence
from typing import Any

from rl.harness import env_vars
from rl.harness.errors import HarnessError

# The generic binary: any recipe (by its dotted module), study or catalog command.
HARNESS_TARGET = "//rl/harness:rl-harness"
_PYTHON_ENTRY = ("python", "-m", "rl.harness.commands.cli")


def command_words(built_with_bazel: bool, target: str | None = None, module: str | None = None) -> list[str]:
    """The words that run the harness from the repository root, before a command's own arguments.

    `./bazelw run <target> --` for a recipe's own binary (an rl_experiment: its recipe implied), else the
    generic binary's `./bazelw run //rl/harness:rl-harness --`, or `python -m rl.harness.commands.cli`
    outside Bazel; these two then name `module` (the recipe) when given.
    """
    if built_with_bazel and target and target != HARNESS_TARGET:
        return ["./bazelw", "run", target, "--"]
    words = ["./bazelw", "run", HARNESS_TARGET, "--"] if built_with_bazel else list(_PYTHON_ENTRY)
    return words + ([module] if module else [])


def harness_command(*args: str) -> str:
    """A harness command (`runs`, `show <id>`, `study <module> --resume <id>`) as a line this process prints, to be
    run as printed from the repository root: the generic binary under Bazel, `python -m` outside it."""
    return join(command_words(bool(env_vars.build_info_path())) + list(args))


def join(words: Sequence[str]) -> str:
    """`words` as one shell line (quoted where needed, e.g. a folder with a space)."""
    return shlex.join(map(str, words))


class BuildInfoError(HarnessError, RuntimeError):
    """The build-info file named by the environment is missing or corrupt."""


@dataclasses.dataclass(frozen=True)
class BuildInfo:
    built_with_bazel: bool
    build_hash: str | None = None
    target: str | None = None
    sources_sha256: str | None = None
    num_sources: int | None = None
    sources: dict | None = None  # path -> sha256 of each first-party source
    lock: str | None = None  # requirements_lock.txt, or requirements_lock_cuda.txt under --config=cuda
    lock_sha256: str | None = None
    bazel_version: str | None = None
    interpreter: dict | None = None
    library: dict | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise BuildInfoError(f"cannot read the {what} at {path} ({error}); rebuild the binary with bazel") from error


def current() -> BuildInfo:
    """The identity of the running binary (see module docstring)."""
    path = env_vars.build_info_path()
    if not path:
        return BuildInfo(
            built_with_bazel=False,
            reason=f"${env_vars.BUILD_INFO_ENV} is unset: not running as an rl_py_binary",
        )
    record = _read_json(path, "build info")
    stamp_path = env_vars.build_stamp_path()
    stamp = _read_json(stamp_path, "build stamp") if stamp_path else {}
    return BuildInfo(
        built_with_bazel=True,
        build_hash=record["build_hash"],
        target=record.get("target"),
        sources_sha256=record.get("sources_sha256"),
        num_sources=record.get("num_sources"),
        sources=record.get("sources"),
        lock=record.get("lock"),
        lock_sha256=record.get("lock_sha256"),
        bazel_version=record.get("bazel_version"),
        interpreter=record.get("interpreter"),
        library=record.get("library"),
        git_commit=stamp.get("git_commit"),
        git_dirty=stamp.get("git_dirty"),
    )
