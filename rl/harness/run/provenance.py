"""Provenance facts for the run manifest: code state, library versions, source hashes.

    provenance.git_state("/path/inside/a/repo")
    # {"root": ..., "commit": "edb83cb...", "dirty": True, "diff_sha256": "..."}
    provenance.package_versions()   # {"python": "3.11.7", "ray": "2.56.0", "torch": ..., ...}
    provenance.file_sha256(path)
    change = provenance.uncommitted_change(root)   # the patch that recreates a dirty checkout
    change.patch; change.omitted                   # bytes for `git apply`; untracked files over the cap
    change.untracked; change.refused               # untracked files taken; credential-shaped files left out, and why

Nothing here imports the libraries it reports on (versions come from package metadata).

A run's outputs are not its inputs: every folder named `results` or `artifacts`, and every folder
holding `records.OUTPUT_ROOT_MARKER` (each results and artifacts root the harness writes to, whatever
its name), is left out of the dirty flag, the hash and the patch. A file whose path or content looks
like a credential (`refusal`: untracked files by their content, tracked ones by their diff) is left
out of the hash and the patch too, so no secret reaches a record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess

from rl.harness import env_vars
from rl.harness.run import records, redaction

# Distributions whose versions every manifest records (import name differs for none of them).
RECORDED_DISTRIBUTIONS = ("ray", "torch", "gymnasium", "numpy")
_GIT_TIMEOUT_S = 30
# Results and artifacts are a run's outputs, never its inputs: a checkout holding not yet
# committed results is not dirty for them, and they never reach the hash or the patch.
OUTPUT_FOLDERS = ("results", "artifacts")
_OUTPUT_EXCLUDES = tuple(f":(exclude,glob)**/{folder}/**" for folder in OUTPUT_FOLDERS)
# Files never taken into a patch or the code hash, by the name of the file or of a folder above it.
CREDENTIAL_NAMES = (
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "secrets*",
    "credentials*",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".pgpass",
    ".npmrc",
    ".yarnrc*",
    ".aws",
    ".docker",
    ".kube",
    "kubeconfig*",
    "*.kubeconfig",
    "*.tfvars",
    "*.tfvars.json",
    "*.tfstate*",
)
# File names that speak of a secret or a token are a credential's too, except source code and
# documentation, whose content the scan reads (rl/analysis/token_contexts.py is code about tokens).
SECRETIVE_NAMES = ("*secret*", "*token*")
_READ_NOT_NAMED = (".py", ".bzl", ".md", ".rst")
# ssh keys: id_rsa, id_ed25519.pub, ... (a module such as id_map.py is code, not a key).
_SSH_KEY_NAME = re.compile(r"id_[A-Za-z0-9_]+(\.pub)?")
_SCAN_CHUNK_BYTES = 1 << 20
_SCAN_OVERLAP_BYTES = 8 << 10  # longer than any credential shape, so none is missed at a chunk's edge


def file_sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def untracked_sources(folder: str, limit: int = 1000) -> dict:
    """What a run of code outside git records instead of a commit: the sha256 of each .py file under `folder`
    (by relative path; output roots, hidden folders and __pycache__ left out), at most `limit` of them.

        {"folder": "/home/me/exp", "files": {"recipe.py": "ab12...", "lib/model.py": "..."}, "left_out": 0}
    """
    files, left_out = {}, 0
    for current, subfolders, names in os.walk(folder):
        if records.OUTPUT_ROOT_MARKER in names:
            subfolders[:] = []
            continue
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".") and name != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                if len(files) < limit:
                    path = os.path.join(current, name)
                    files[os.path.relpath(path, folder)] = file_sha256(path)
                else:
                    left_out += 1
    return {"folder": folder, "files": files, "left_out": left_out}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for distribution in RECORDED_DISTRIBUTIONS:
        try:
            versions[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            versions[distribution] = None
    return versions


def _git(folder: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", folder, *args], check=True, capture_output=True, timeout=_GIT_TIMEOUT_S).stdout


def no_commit_reason(path: str) -> str | None:
    """Why the code at `path` has no commit to record (outside a git checkout, a repository with no commit yet,
    no git), as git says it in one line; None when it has one."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        _git(folder, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except (OSError, subprocess.SubprocessError) as error:
        detail = (getattr(error, "stderr", b"") or b"").decode(errors="replace").strip().splitlines()
        if isinstance(error, subprocess.CalledProcessError) and not detail:  # --quiet: a repository without a commit
            return f"the git repository at {folder} has no commit yet"
        return detail[0] if detail else str(error)
    return None


def _output_pathspec(root: str) -> tuple[str, ...]:
    """`git` pathspec arguments: the whole checkout but its output folders (by name and by marker)."""
    marker = f":(glob)**/{records.OUTPUT_ROOT_MARKER}"
    listed = (
        _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", marker)
        + b"\0"
        + _git(root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--", marker)
    )
    folders = sorted(
        {
            os.path.dirname(name.decode())
            for name in listed.split(b"\0")
            if os.path.basename(name.decode()) == records.OUTPUT_ROOT_MARKER
        }
    )
    return ("--", ".", *_OUTPUT_EXCLUDES, *(f":(exclude,top,literal){folder}" for folder in folders if folder))


def _name_refusal(name: str) -> str | None:
    """Why the path `name` is a credential file's by its name or a folder's above it (CREDENTIAL_NAMES, ssh keys)
    or by its file name (SECRETIVE_NAMES), or None."""
    parts = name.split("/")
    for part in parts:
        if _SSH_KEY_NAME.fullmatch(part) or any(fnmatch.fnmatchcase(part.lower(), p) for p in CREDENTIAL_NAMES):
            return f"the name {part!r} is a credential file's"
    file_name = parts[-1].lower()
    if not file_name.endswith(_READ_NOT_NAMED) and any(fnmatch.fnmatchcase(file_name, p) for p in SECRETIVE_NAMES):
        return f"the name {parts[-1]!r} is a credential file's"
    return None


def _content_refusal(content: bytes) -> str | None:
    found = redaction.credential_in(content)
    return f"it holds {found}" if found else None


def refusal(root: str, name: str) -> str | None:
    """Why untracked file `name` (relative to `root`) must stay out of the records, or None.

    Its name or a folder's above it is a credential's (`_name_refusal`), or its content holds one
    (`redaction.credential_in`: private key blocks, known token formats, secret-named assignments,
    registered secrets).
    """
    if reason := _name_refusal(name):
        return reason
    path = os.path.join(root, name)
    if os.path.islink(path) or not os.path.isfile(path):
        return None  # a link is recorded as its target's path, never the target's content
    with open(path, "rb") as handle:
        tail = b""
        while chunk := handle.read(_SCAN_CHUNK_BYTES):
            if reason := _content_refusal(tail + chunk):
                return reason
            tail = chunk[-_SCAN_OVERLAP_BYTES:]
    return None


def tracked_refusals(root: str, pathspec: tuple[str, ...]) -> dict[str, str]:
    """Tracked files whose change against HEAD (staged or not) must stay out of the records: path -> why.

    The same test as for untracked files (`refusal`), read on each file's diff: a token staged into a
    tracked file, or a changed `.envrc`, would otherwise enter the patch.
    """
    changed = _git(root, "diff", "HEAD", "--name-only", "-z", *pathspec)
    refused = {}
    for name in sorted(item.decode() for item in changed.split(b"\0") if item):
        reason = _name_refusal(name) or _content_refusal(_tracked_diff(root, ("--", f":(top,literal){name}")))
        if reason:
            refused[name] = reason
    return refused


def _code_pathspec(root: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """(pathspec of the code the records take, refused tracked files): output folders and refused files left out."""
    pathspec = _output_pathspec(root)
    refused = tracked_refusals(root, pathspec)
    return (*pathspec, *(f":(exclude,top,literal){name}" for name in refused)), refused


@dataclasses.dataclass(frozen=True)
class UntrackedFiles:
    """The untracked, non-ignored files of a checkout outside its output folders, sorted."""

    taken: list[str]  # provenance covers them (the hash, the patch)
    refused: dict[str, str]  # left out of everything: path -> why (`refusal`)


def untracked_files(root: str, pathspec: tuple[str, ...] | None = None) -> UntrackedFiles:
    listing = _git(root, "ls-files", "--others", "--exclude-standard", "-z", *(pathspec or _output_pathspec(root)))
    taken, refused = [], {}
    for name in sorted(item.decode() for item in listing.split(b"\0") if item):
        try:
            reason = refusal(root, name)
        except FileNotFoundError:  # gone since git listed it (another process's temporary file)
            continue
        if reason:
            refused[name] = reason
        else:
            taken.append(name)
    return UntrackedFiles(taken, refused)


def git_state(path: str) -> dict:
    """Commit, dirty flag and a sha256 of the uncommitted change of the repo holding `path`.

    The diff hash covers `git diff HEAD` (staged and unstaged) and the content of the untracked,
    non-ignored files provenance takes, so two runs with the same commit and the same hash ran the
    same code. Output folders and refused untracked files (module docstring) are left out of all
    three; `refused_untracked` and `refused_tracked` name the refused ones (path -> why) when there are any
    (a refused tracked file still makes the checkout dirty: the patch then cannot recreate it exactly).
    Outside a git checkout (or without git) the fields are null and `reason` says why.
    """
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        root = _git(folder, "rev-parse", "--show-toplevel").decode().strip()
        commit = _git(root, "rev-parse", "HEAD").decode().strip()
        pathspec, refused_tracked = _code_pathspec(root)
        # Dirty counts the refused files too: the checkout is not the commit, whatever the patch holds.
        tracked = _git(root, "status", "--porcelain", "--untracked-files=no", *_output_pathspec(root))
        digest = hashlib.sha256(_tracked_diff(root, pathspec))
        untracked = untracked_files(root, pathspec)
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        reason = detail.decode(errors="replace").strip().splitlines()[:1] or [str(error)]
        return {"root": None, "commit": None, "dirty": None, "diff_sha256": None, "reason": reason[0]}
    for name in untracked.taken:
        file_path = os.path.join(root, name)
        digest.update(b"\0untracked\0" + name.encode() + b"\0")
        if os.path.isfile(file_path):
            with contextlib.suppress(FileNotFoundError):  # gone since it was listed
                digest.update(file_sha256(file_path).encode())
    dirty = bool(tracked.strip()) or bool(untracked.taken)
    state = {
        "root": root,
        "commit": commit,
        "dirty": dirty,
        "diff_sha256": digest.hexdigest() if dirty else None,
    }
    if untracked.refused:
        state["refused_untracked"] = untracked.refused
    if refused_tracked:
        state["refused_tracked"] = refused_tracked
    return state


def _tracked_diff(root: str, pathspec: tuple[str, ...]) -> bytes:
    return _git(root, "diff", "HEAD", "--binary", *pathspec)


@dataclasses.dataclass(frozen=True)
class UncommittedChange:
    """What `git apply` needs to turn the commit back into the checkout `git_state` hashed."""

    patch: bytes
    omitted: list[str]  # untracked files left out to stay under the cap: the hash will not verify
    untracked: list[str] = dataclasses.field(default_factory=list)  # untracked files the patch adds
    refused: dict[str, str] = dataclasses.field(default_factory=dict)  # credential-shaped, left out: path -> why


def uncommitted_change(root: str, cap_bytes: int = env_vars.DEFAULT_PATCH_CAP_BYTES) -> UncommittedChange:
    """The tracked diff against HEAD plus every untracked file provenance takes, as a new-file diff.

    Outside the output folders and without refused files, as `git_state` hashes it.
    Untracked files are added smallest first while the patch stays under `cap_bytes`; the tracked
    diff always goes in whole (it is what the run changed on purpose).
    """
    pathspec, refused_tracked = _code_pathspec(root)
    patch = _tracked_diff(root, pathspec)
    untracked = untracked_files(root, pathspec)
    omitted, added = [], []
    # lstat: an untracked symlink is content as git stores it, and a dangling one (a stale Bazel
    # runfiles link) has no target to measure.
    sizes = {}
    for name in untracked.taken:
        with contextlib.suppress(FileNotFoundError):  # gone since it was listed: nothing to add
            sizes[name] = os.lstat(os.path.join(root, name)).st_size
    for name in sorted(sizes, key=lambda name: (sizes[name], name)):
        # `--no-index` exits 1 when the files differ, which they always do here.
        addition = subprocess.run(
            ["git", "-C", root, "diff", "--no-index", "--binary", "--", os.devnull, name],
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        ).stdout
        if len(patch) + len(addition) > cap_bytes:
            omitted.append(name)
        else:
            patch += addition
            added.append(name)
    return UncommittedChange(
        patch=patch, omitted=omitted, untracked=sorted(added), refused={**untracked.refused, **refused_tracked}
    )
