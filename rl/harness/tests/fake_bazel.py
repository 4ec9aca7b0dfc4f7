"""A stand-in for `bazel` ($RL_HARNESS_BAZEL) that builds and runs a recipe of a plain git checkout.

    python fake_bazel.py build [--flag ...] -- //tiny:recipe        # bazel-bin/tiny/recipe.build_info.json
    python fake_bazel.py run [--flag ...] -- //tiny:recipe ARGS     # builds, then `rl.harness.commands.cli tiny.recipe ARGS`
    python fake_bazel.py run -- //rl/harness:rl-harness study ...   # the harness's own binary: `rl.harness.commands.cli ARGS`

Bazel cannot run inside a Bazel test's sandbox, so the reproduce tests build with this: the
identity is the real tools/build_info/compute.py over every .py file of the checkout (outside
results/, artifacts/ and bazel-*/), with this interpreter and "fake" as the Bazel version.
The harness itself comes from the tree holding this file; flags (--override_repository) are ignored,
except `--workspace_status_command`, which runs as Bazel runs it (what a crafted target would exploit).
"""

import json
import os
import platform
import subprocess
import sys

# rl/harness/tests/fake_bazel.py -> the tree holding rl/ and tools/ (the workspace or the runfiles root).
HARNESS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_NOT_SOURCES = ("results", "artifacts", ".git")
HARNESS_TARGET = "//rl/harness:rl-harness"  # runs the generic CLI, as `bazel run //rl/harness:rl-harness` does


def _sources(checkout: str) -> list[tuple[str, str]]:
    found = []
    for folder, subfolders, files in os.walk(checkout):
        subfolders[:] = [name for name in subfolders if name not in _NOT_SOURCES and not name.startswith("bazel-")]
        found += [
            (os.path.relpath(os.path.join(folder, name), checkout), os.path.join(folder, name))
            for name in files
            if name.endswith(".py")
        ]
    return sorted(found)


def build(checkout: str, target: str) -> str:
    """Writes the target's build info where Bazel would; returns its path."""
    package, _, name = target.lstrip("/").partition(":")
    output_dir = os.path.join(checkout, "bazel-bin", package)
    os.makedirs(output_dir, exist_ok=True)
    manifest, identity = os.path.join(output_dir, f"{name}.sources.tsv"), os.path.join(output_dir, "identity.json")
    with open(manifest, "w") as handle:
        handle.writelines(f"{short_path}\t{path}\n" for short_path, path in _sources(checkout))
    with open(identity, "w") as handle:
        json.dump({"version": platform.python_version(), "executable": sys.executable, "bazel_version": "fake"}, handle)
    output = os.path.join(output_dir, f"{name}.build_info.json")
    subprocess.run(
        [
            sys.executable,
            os.path.join(HARNESS_ROOT, "tools", "build_info", "compute.py"),
            "--output",
            output,
            "--target",
            target,
            "--manifest",
            manifest,
            "--identity",
            identity,
            "--lock",
            os.path.join(checkout, "requirements_lock.txt"),
        ],
        check=True,
    )
    return output


def residue(words: list[str]) -> list[str]:
    """What Bazel reads as targets (and, for `run`, the target's arguments): every word that is not an
    option, and every word after the first `--`."""
    for index, word in enumerate(words):
        if word == "--":
            return [w for w in words[:index] if not w.startswith("-")] + words[index + 1 :]
    return [word for word in words if not word.startswith("-")]


def run_status_commands(words: list[str]) -> None:
    """Runs each `--workspace_status_command=...` among the options, with a shell, as Bazel does before a build."""
    options = words[: words.index("--")] if "--" in words else words
    for word in options:
        if word.startswith("--workspace_status_command="):
            subprocess.run(word.partition("=")[2], shell=True, check=False)


def main(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    run_status_commands(rest)
    target, *arguments = residue(rest)
    checkout = os.getcwd()
    build_info = build(checkout, target)
    if command == "build":
        return 0
    module = [] if target == HARNESS_TARGET else [target.lstrip("/").replace("/", ".").replace(":", ".")]
    environment = {**os.environ, "RL_BUILD_INFO": build_info, "PYTHONPATH": os.pathsep.join([checkout, HARNESS_ROOT])}
    # As `bazel run` does, the binary replaces this process: signals sent to it reach the run.
    os.execve(sys.executable, [sys.executable, "-m", "rl.harness.commands.cli", *module, *arguments], environment)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
