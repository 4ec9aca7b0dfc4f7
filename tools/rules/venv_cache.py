"""Builds (once) or finds the content-addressed venv of a lock; prints its python's path.

Run by the `rl_python` repository rule with the pinned interpreter:

    python3.11 venv_cache.py --lock requirements_lock.txt --cache-root ~/.cache/rl_harness/venvs \\
        --identity "$(python3.11 probe_interpreter.py requirements_lock.txt)"

The folder's key is a sha256 of what the venv is built from: the interpreter (version, sha256 of
the executable and libpython), the lock's sha256 and BUILD_FORMAT. Every clone and output base on
a machine gets the same folder, so the launcher stubs and `identity.json` that name the
interpreter are byte-identical across clones, and Bazel's disk cache can serve one clone's test results to another. Standard library
only: it runs before any venv exists.

The folder is `<cache root>/<lock stem>-<key[:16]>/`. A build holds an exclusive `flock` on
`<folder>.lock` (two Bazel servers asking at once build it once) and writes `<folder>/COMPLETE`
last: a folder without it (a build killed midway) is removed and built again.
"""

import argparse
import fcntl
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys

COMPLETE_MARKER = "COMPLETE"
KEY_PREFIX_CHARS = 16
# Bump when build() changes what a venv holds (its pip flags, say), so every machine builds anew.
BUILD_FORMAT = 1
# The interpreter and lock fields of probe_interpreter.py's identity that decide the venv's content.
KEY_FIELDS = ("version", "implementation", "executable_sha256", "libpython_sha256", "lock_sha256")


def venv_key(identity: dict) -> str:
    """sha256 hex over the identity's KEY_FIELDS and BUILD_FORMAT."""
    missing = [field for field in KEY_FIELDS if field not in identity]
    if missing:
        sys.exit(f"rl_python: the interpreter identity lacks {missing}; Fix: pass probe_interpreter.py's output.")
    payload = {field: identity[field] for field in KEY_FIELDS}
    payload["build_format"] = BUILD_FORMAT
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def venv_folder(cache_root: pathlib.Path, lock: pathlib.Path, key: str) -> pathlib.Path:
    """Where the venv of `lock` under `key` lives (the lock's stem keeps `ls` readable)."""
    return cache_root / f"{lock.stem}-{key[:KEY_PREFIX_CHARS]}"


def _run(command: list[str], what: str, fix: str) -> None:
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"rl_python: {what} failed (exit {result.returncode}).\n{result.stdout}\nFix: {fix}")


def build(folder: pathlib.Path, lock: pathlib.Path) -> None:
    """A venv in the (absent) `folder` from the hashed lock, byte-compiled and `pip check`ed."""
    relock = f"relock with `python{sys.version_info[0]}.{sys.version_info[1]} tools/relock.py`"
    _run(
        [sys.executable, "-m", "venv", str(folder)],
        "`python -m venv`",
        "install the interpreter's venv module (Debian: python3.11-venv)",
    )
    python = str(folder / "bin" / "python3")
    # --compile: read-only sandboxes never recompile torch (240 s vs 37 s a test, docs/building.md).
    _run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--require-hashes",
            "--no-deps",
            "--compile",
            "-r",
            str(lock),
        ],
        f"installing {lock.name}",
        f"check network access to the package index; if the lock is stale, {relock}",
    )
    # --no-deps trusts the lock to be complete; `pip check` proves it (e.g. a CUDA torch build
    # picked without its NVIDIA packages fails here, not at import time).
    _run(
        [python, "-m", "pip", "check", "--disable-pip-version-check"],
        f"`pip check` of the venv from {lock.name}",
        f"{relock} (docs/building.md explains torch's CPU wheel)",
    )
    (folder / COMPLETE_MARKER).write_text(f"{lock.name}\n")


def ensure(cache_root: pathlib.Path, lock: pathlib.Path, key: str) -> pathlib.Path:
    """The venv's python, building the venv first unless a complete one is there."""
    folder = venv_folder(cache_root, lock, key)
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not (folder / COMPLETE_MARKER).is_file():
            print(f"rl_python: building {folder} (minutes, once per machine and lock)", file=sys.stderr)
            shutil.rmtree(folder, ignore_errors=True)  # what a build killed midway left
            build(folder, lock)
    return folder / "bin" / "python3"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=pathlib.Path, required=True)
    parser.add_argument("--cache-root", type=pathlib.Path, required=True)
    parser.add_argument("--identity", required=True, help="probe_interpreter.py's JSON for this interpreter and lock")
    arguments = parser.parse_args()
    try:
        identity = json.loads(arguments.identity)
    except json.JSONDecodeError as error:
        sys.exit(f"rl_python: --identity is not JSON ({error}); Fix: pass probe_interpreter.py's output.")
    key = venv_key(identity)
    print(ensure(arguments.cache_root.expanduser().absolute(), arguments.lock, key))


if __name__ == "__main__":
    main()
