"""Provenance facts for the run manifest: code state, library versions, source hashes.

    provenance.git_state("/path/inside/a/repo")
    # {"root": ..., "commit": "edb83cb...", "dirty": True, "diff_sha256": "..."}
    provenance.package_versions()   # {"python": "3.11.7", "ray": "2.56.0", "torch": ..., ...}
    provenance.file_sha256(path)
    change = provenance.uncommitted_change(root)   # the patch that recreates a dirty checkout
    change.patch; change.omitted                   # bytes for `git apply`; untracked files over the cap

Nothing here imports the libraries it reports on (versions come from package metadata).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
import platform
import subprocess
from typing import Optional

from rl.harness import settings

# Distributions whose versions every manifest records (import name differs for none of them).
RECORDED_DISTRIBUTIONS = ("ray", "torch", "gymnasium", "numpy")
_GIT_TIMEOUT_S = 30
# Results and artifacts are a run's outputs, never its inputs: a checkout holding not yet
# committed results is not dirty for them, and they never reach the hash or the patch.
OUTPUT_FOLDERS = ("results", "artifacts")
_OUTPUT_PATHSPEC = ("--", ".", *(f":(exclude,glob)**/{folder}/**" for folder in OUTPUT_FOLDERS))


def file_sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def package_versions() -> dict[str, Optional[str]]:
    versions: dict[str, Optional[str]] = {"python": platform.python_version()}
    for distribution in RECORDED_DISTRIBUTIONS:
        try:
            versions[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            versions[distribution] = None
    return versions


def _git(folder: str, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", folder, *args], check=True, capture_output=True, timeout=_GIT_TIMEOUT_S
    ).stdout


def git_state(path: str) -> dict:
    """Commit, dirty flag and a sha256 of the uncommitted change of the repo holding `path`.

    The diff hash covers `git diff HEAD` (staged and unstaged) and the content of untracked,
    non-ignored files, so two runs with the same commit and the same hash ran the same code.
    Every `results/` and `artifacts/` folder (OUTPUT_FOLDERS) is left out of all three.
    Outside a git checkout (or without git) the fields are null and `reason` says why.
    """
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        root = _git(folder, "rev-parse", "--show-toplevel").decode().strip()
        commit = _git(root, "rev-parse", "HEAD").decode().strip()
        status = _git(root, "status", "--porcelain", "--untracked-files=normal", *_OUTPUT_PATHSPEC)
        digest = hashlib.sha256(_tracked_diff(root))
        untracked = _untracked(root)
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        reason = detail.decode(errors="replace").strip().splitlines()[:1] or [str(error)]
        return {"root": None, "commit": None, "dirty": None, "diff_sha256": None, "reason": reason[0]}
    for name in untracked:
        file_path = os.path.join(root, name.decode())
        digest.update(b"\0untracked\0" + name + b"\0")
        if os.path.isfile(file_path):
            digest.update(file_sha256(file_path).encode())
    dirty = bool(status.strip())
    return {
        "root": root,
        "commit": commit,
        "dirty": dirty,
        "diff_sha256": digest.hexdigest() if dirty else None,
    }


def _tracked_diff(root: str) -> bytes:
    return _git(root, "diff", "HEAD", "--binary", *_OUTPUT_PATHSPEC)


def _untracked(root: str) -> list[bytes]:
    listing = _git(root, "ls-files", "--others", "--exclude-standard", "-z", *_OUTPUT_PATHSPEC)
    return sorted(filter(None, listing.split(b"\0")))


@dataclasses.dataclass(frozen=True)
class UncommittedChange:
    """What `git apply` needs to turn the commit back into the checkout `git_state` hashed."""

    patch: bytes
    omitted: list[str]  # untracked files left out to stay under the cap: the hash will not verify


def uncommitted_change(root: str, cap_bytes: int = settings.DEFAULT_PATCH_CAP_BYTES) -> UncommittedChange:
    """The tracked diff against HEAD plus every untracked, non-ignored file as a new-file diff.

    Outside OUTPUT_FOLDERS, as `git_state` hashes it.
    Untracked files are added smallest first while the patch stays under `cap_bytes`; the tracked
    diff always goes in whole (it is what the run changed on purpose).
    """
    patch = _tracked_diff(root)
    omitted = []
    # lstat: an untracked symlink is content as git stores it, and a dangling one (a stale Bazel
    # runfiles link) has no target to measure.
    for name in sorted(_untracked(root), key=lambda name: (os.lstat(os.path.join(root, name.decode())).st_size, name)):
        # `--no-index` exits 1 when the files differ, which they always do here.
        addition = subprocess.run(["git", "-C", root, "diff", "--no-index", "--binary", "--", os.devnull, name.decode()],
                                  capture_output=True, timeout=_GIT_TIMEOUT_S).stdout
        if len(patch) + len(addition) > cap_bytes:
            omitted.append(name.decode())
        else:
            patch += addition
    return UncommittedChange(patch=patch, omitted=omitted)
