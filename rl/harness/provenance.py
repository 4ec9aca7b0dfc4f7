"""Provenance facts for the run manifest: code state, library versions, source hashes.

    provenance.git_state("/path/inside/a/repo")
    # {"root": ..., "commit": "edb83cb...", "dirty": True, "diff_sha256": "..."}
    provenance.package_versions()   # {"python": "3.11.7", "ray": "2.56.0", "torch": ..., ...}
    provenance.file_sha256(path)

Nothing here imports the libraries it reports on (versions come from package metadata).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
from typing import Optional

# Distributions whose versions every manifest records (import name differs for none of them).
RECORDED_DISTRIBUTIONS = ("ray", "torch", "gymnasium", "numpy")
_GIT_TIMEOUT_S = 30


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
    Outside a git checkout (or without git) the fields are null and `reason` says why.
    """
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        root = _git(folder, "rev-parse", "--show-toplevel").decode().strip()
        commit = _git(root, "rev-parse", "HEAD").decode().strip()
        status = _git(root, "status", "--porcelain", "--untracked-files=normal")
        digest = hashlib.sha256(_git(root, "diff", "HEAD", "--binary"))
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z").split(b"\0")
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        reason = detail.decode(errors="replace").strip().splitlines()[:1] or [str(error)]
        return {"root": None, "commit": None, "dirty": None, "diff_sha256": None, "reason": reason[0]}
    for name in sorted(filter(None, untracked)):
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
