"""The CI guard fails when a build touches the source tree, shown on a scratch git checkout.

The scratch checkout has a Bazel-like runfiles tree beside it whose files link into the
sources, as a test's runfiles do; a test writing through such a link is what the guard exists
to catch.
"""

import os
import subprocess
import sys

import pytest

from tools.ci import source_guard

TRACKED = {
    "pkg/__init__.py": "",
    "pkg/core.py": "VALUE = 1\n",
    ".gitignore": "/bazel-*\n",
}


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "checkout"
    for name, text in TRACKED.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
        # An hour old, so a rewrite moves the modification time whatever the clock's grain.
        os.utime(root / name, (os.path.getatime(root / name) - 3600,) * 2)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


def _runfiles(tmp_path, checkout):
    """A test's runfiles tree: links into the checkout."""
    runfiles = tmp_path / "test.runfiles" / "_main" / "pkg"
    runfiles.mkdir(parents=True)
    for name in ("__init__.py", "core.py"):
        (runfiles / name).symlink_to(checkout / "pkg" / name)
    return runfiles


def _guard(action, checkout, state):
    return subprocess.run(
        [sys.executable, source_guard.__file__, action, str(state), "--root", str(checkout)],
        capture_output=True,
        text=True,
        check=False,
    )


def _guarded(checkout, state, build):
    assert _guard("snapshot", checkout, state).returncode == 0
    build()
    return _guard("check", checkout, state)


def test_a_build_that_only_reads_passes(tmp_path, checkout):
    runfiles = _runfiles(tmp_path, checkout)
    checked = _guarded(checkout, tmp_path / "state.json", lambda: (runfiles / "core.py").read_text())
    assert (checked.returncode, checked.stderr) == (0, "")


def test_a_test_writing_into_its_runfiles_fails_the_guard_naming_the_file(tmp_path, checkout):
    runfiles = _runfiles(tmp_path, checkout)
    checked = _guarded(checkout, tmp_path / "state.json", lambda: (runfiles / "core.py").write_text(""))
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        "source_guard: the build touched the source tree: pkg/core.py: content (sha256, size, mtime_ns changed)"
    ]


def test_an_empty_file_written_again_with_its_own_content_fails_the_guard(tmp_path, checkout):
    runfiles = _runfiles(tmp_path, checkout)
    checked = _guarded(checkout, tmp_path / "state.json", lambda: (runfiles / "__init__.py").write_text(""))
    assert checked.returncode == 1
    assert "pkg/__init__.py: rewritten with the same content (mtime_ns changed)" in checked.stderr


def test_created_and_removed_files_fail_the_guard_and_ignored_ones_do_not(tmp_path, checkout):
    def build():
        (checkout / "pkg" / "generated.py").write_text("")
        (checkout / "pkg" / "core.py").unlink()
        (checkout / "bazel-out").write_text("ignored by .gitignore")

    checked = _guarded(checkout, tmp_path / "state.json", build)
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        "source_guard: the build touched the source tree: pkg/core.py: removed",
        "source_guard: the build touched the source tree: pkg/generated.py: created",
    ]


def test_a_check_without_a_snapshot_says_how_to_take_one(tmp_path, checkout):
    checked = _guard("check", checkout, tmp_path / "missing.json")
    assert checked.returncode == 2
    assert len(checked.stderr.splitlines()) == 1
    assert "run `source_guard.py snapshot` before the build" in checked.stderr
