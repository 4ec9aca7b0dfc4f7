"""Proves that a build left the source tree alone: no file written, created, removed or re-moded.

    python3 tools/ci/source_guard.py snapshot /tmp/before.json   # before the build
    ./bazelw test //...
    python3 tools/ci/source_guard.py check /tmp/before.json      # exit 1, naming each file touched

It covers every tracked file and every untracked file git does not ignore, in the checkout
that holds this file (or `--root`). A file counts as touched when its content, size, mode,
inode or modification time differ, so a file rewritten with its own content (an empty
`__init__.py` written again through a link) counts too. Standard library only.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _listed_files(root: str) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    return sorted({name for name in listed.decode().split("\0") if name})


def _state(path: str) -> dict | None:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    digest = hashlib.sha256()
    if os.path.islink(path):
        digest.update(os.readlink(path).encode())
    elif os.path.isfile(path):
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return {
        "sha256": digest.hexdigest(),
        "size": status.st_size,
        "mode": status.st_mode,
        "inode": status.st_ino,
        "mtime_ns": status.st_mtime_ns,
    }


def snapshot(root: str) -> dict[str, dict | None]:
    """The state of every listed file under `root`, by path relative to it."""
    return {name: _state(os.path.join(root, name)) for name in _listed_files(root)}


def touched(before: dict[str, dict | None], after: dict[str, dict | None]) -> list[str]:
    """One line per file whose state differs: `<path>: <what changed>`."""
    lines = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None:
            lines.append(f"{name}: created")
        elif new is None:
            lines.append(f"{name}: removed")
        else:
            changed = [key for key in ("sha256", "size", "mode", "inode", "mtime_ns") if old[key] != new[key]]
            what = "content" if "sha256" in changed else "rewritten with the same content"
            lines.append(f"{name}: {what} ({', '.join(changed)} changed)")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["snapshot", "check"])
    parser.add_argument("state_file", help="where `snapshot` writes the state and `check` reads it")
    parser.add_argument("--root", default=_CHECKOUT, help="the checkout (default: this file's)")
    args = parser.parse_args(argv)
    if args.action == "snapshot":
        with open(args.state_file, "w") as stream:
            json.dump(snapshot(args.root), stream)
        return 0
    try:
        with open(args.state_file) as stream:
            before = json.load(stream)
    except (OSError, ValueError) as error:
        print(
            f"source_guard: cannot read the snapshot {args.state_file} ({error}): "
            "run `source_guard.py snapshot` before the build",
            file=sys.stderr,
        )
        return 2
    lines = touched(before, snapshot(args.root))
    for line in lines:
        print(f"source_guard: the build touched the source tree: {line}", file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
