"""Real file-system faults for tests: a read-only folder and a small (soon full) one, as tmpfs mounts.

    with mounts.read_only(tmp_path / "ro"):       # writes fail with EROFS, for root too
        ...
    with mounts.small(tmp_path / "full", "200k"): # writes fail with ENOSPC once 200 KiB are used
        ...

Tests run as root, which ignores a folder's mode (chmod 0555 stops nothing), so the fault is a
mount: the test is skipped, naming why, where mounting is not allowed (no CAP_SYS_ADMIN).
"""

import contextlib
import pathlib
import subprocess

import pytest


def _mount(folder: pathlib.Path, options: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {done.stderr.strip()}")


@contextlib.contextmanager
def _mounted(folder: pathlib.Path, options: str):
    _mount(folder, options)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def read_only(folder: pathlib.Path):
    """`folder` as an empty read-only file system while the block runs."""
    return _mounted(folder, "ro,size=64k")


def small(folder: pathlib.Path, size: str = "200k"):
    """`folder` as an empty file system of `size` (e.g. "200k") while the block runs."""
    return _mounted(folder, f"size={size}")
