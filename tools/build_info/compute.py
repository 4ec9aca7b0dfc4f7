"""Computes a binary's build identity (the action behind rl_build_info / rl_stamp_info).

Standard library only. The hashing lives in `build_hash()` so tests can check
its properties directly on files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile

SCHEMA_VERSION = 1


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_digests(sources: list[tuple[str, str]]) -> dict[str, str]:
    """workspace-relative path -> content sha256 (recorded, so a changed build can name the file)."""
    return {short_path: _sha256_file(path) for short_path, path in sorted(sources)}


def sources_hash(sources: list[tuple[str, str]]) -> str:
    """sha256 over (workspace-relative path, content sha256) of every source, order-free."""
    digest = hashlib.sha256()
    for short_path, content_sha256 in source_digests(sources).items():
        digest.update(f"{short_path}\0{content_sha256}\n".encode())
    return digest.hexdigest()


def build_hash(identity: dict, lock_sha256: str, sources_sha256: str) -> str:
    """The build hash: interpreter identity + Bazel version + lock + first-party sources."""
    toolchain = {
        key: identity.get(key) for key in ("version", "executable_sha256", "libpython_sha256", "bazel_version")
    }
    payload = json.dumps(
        {"toolchain": toolchain, "lock_sha256": lock_sha256, "sources_sha256": sources_sha256},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def read_manifest(path: str) -> list[tuple[str, str]]:
    with open(path) as handle:
        return [tuple(line.rstrip("\n").split("\t", 1)) for line in handle if line.strip()]


def write_json_atomically(path: str, record: dict) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(handle, "w") as stream:
        json.dump(record, stream, indent=2, sort_keys=True)
        stream.write("\n")
    os.replace(temporary, path)


def library_record(revision_path: str | None) -> dict:
    """Which rl-harness revision the binary was built against.

    In this repository the library is the workspace itself (its commit is the
    experiment commit). A dependent workspace pins it; its repository rule
    writes LIBRARY_REVISION.json (commit, dirty flag, source).
    """
    if not revision_path:
        return {"external": False}
    with open(revision_path) as handle:
        return dict(json.load(handle), external=True)


def build_info_record(
    target: str, manifest: str, identity_path: str, lock_path: str, library_revision: str | None = None
) -> dict:
    with open(identity_path) as handle:
        identity = json.load(handle)
    sources = read_manifest(manifest)
    lock_sha256 = _sha256_file(lock_path)
    sources_sha256 = sources_hash(sources)
    return {
        "schema_version": SCHEMA_VERSION,
        "target": target,
        "build_hash": build_hash(identity, lock_sha256, sources_sha256),
        "sources_sha256": sources_sha256,
        "num_sources": len(sources),
        "sources": source_digests(sources),
        "lock": identity.get("lock"),  # which lock the venv came from: requirements_lock[_cuda].txt
        "lock_sha256": lock_sha256,
        "bazel_version": identity.get("bazel_version"),
        "library": library_record(library_revision),
        "interpreter": {
            key: identity.get(key)
            for key in ("version", "implementation", "executable", "executable_sha256", "libpython", "libpython_sha256")
        },
    }


def stamp_record(status_file: str) -> dict:
    values = {}
    with open(status_file) as handle:
        for line in handle:
            key, _, value = line.rstrip("\n").partition(" ")
            values[key] = value
    return {
        "git_commit": values.get("STABLE_GIT_COMMIT"),
        "git_dirty": values.get("STABLE_GIT_DIRTY") == "true",
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--stamp-from")
    parser.add_argument("--target")
    parser.add_argument("--manifest")
    parser.add_argument("--identity")
    parser.add_argument("--lock")
    parser.add_argument("--library-revision")
    args = parser.parse_args(argv)
    if args.stamp_from:
        record = stamp_record(args.stamp_from)
    else:
        record = build_info_record(args.target, args.manifest, args.identity, args.lock, args.library_revision)
    write_json_atomically(args.output, record)


if __name__ == "__main__":
    main(sys.argv[1:])
