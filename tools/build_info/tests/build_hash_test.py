"""Build-hash properties: same inputs -> same hash; a closure source or the lock changes it;
an unrelated source does not. Checked on the hashing function and on real Bazel targets."""

import json
import os
import pathlib

from tools.build_info import compute

RUNFILES = pathlib.Path(os.environ.get("TEST_SRCDIR", "."), os.environ.get("TEST_WORKSPACE", "rl_harness"))
IDENTITY = {"version": "3.11.7", "executable_sha256": "e" * 64, "libpython_sha256": "l" * 64, "bazel_version": "4.2.3"}


def _tree(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return [(name, str(tmp_path / name)) for name in files]


def _hash(sources, lock="lock-a"):
    return compute.build_hash(IDENTITY, lock, compute.sources_hash(sources))


def test_same_sources_and_lock_give_the_same_hash(tmp_path):
    first = _tree(tmp_path, {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    assert _hash(first) == _hash(list(reversed(first)))


def test_editing_a_source_in_the_closure_changes_the_hash(tmp_path):
    sources = _tree(tmp_path, {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    before = _hash(sources)
    (tmp_path / "b.py").write_text("y = 3\n")
    assert _hash(sources) != before


def test_changing_the_lock_or_toolchain_changes_the_hash(tmp_path):
    sources = _tree(tmp_path, {"a.py": "x = 1\n"})
    digest = compute.sources_hash(sources)
    assert compute.build_hash(IDENTITY, "lock-a", digest) != compute.build_hash(IDENTITY, "lock-b", digest)
    other_python = dict(IDENTITY, executable_sha256="f" * 64)
    assert compute.build_hash(IDENTITY, "lock-a", digest) != compute.build_hash(other_python, "lock-a", digest)


def test_a_file_outside_the_closure_does_not_change_the_hash(tmp_path):
    sources = _tree(tmp_path, {"a.py": "x = 1\n"})
    before = _hash(sources)
    (tmp_path / "unrelated.py").write_text("z = 1\n")
    assert _hash(sources) == before


def test_renaming_a_source_changes_the_hash(tmp_path):
    sources = _tree(tmp_path, {"a.py": "x = 1\n"})
    assert _hash(sources) != _hash([("renamed.py", sources[0][1])])


def _target_info(name):
    return json.loads((RUNFILES / "tools/build_info" / f"{name}.build_info.json").read_text())


def test_bazel_targets_with_the_same_closure_share_a_hash():
    app, twin = _target_info("fixture_app"), _target_info("fixture_app_twin")
    assert app["build_hash"] == twin["build_hash"]
    # main, fixture_base and the __init__.py of tools/, tools/build_info/ and its testdata/;
    # third-party code is covered by the lock.
    assert app["num_sources"] == 5


def test_bazel_target_with_an_extra_library_differs():
    assert _target_info("fixture_app")["build_hash"] != _target_info("fixture_app_extra")["build_hash"]


def test_bazel_build_info_records_the_real_lock():
    lock = RUNFILES / "requirements_lock.txt"
    import hashlib

    assert _target_info("fixture_app")["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert _target_info("fixture_app")["lock"] == "requirements_lock.txt"  # the default; --config=cuda differs
    assert _target_info("fixture_app")["interpreter"]["version"].startswith("3.11.")


def test_library_is_the_workspace_itself_here():
    assert _target_info("fixture_app")["library"] == {"external": False}


def test_pinned_library_revision_is_recorded(tmp_path):
    revision = tmp_path / "LIBRARY_REVISION.json"
    revision.write_text(json.dumps({"commit": "abc123", "dirty": False, "source": "remote"}))
    assert compute.library_record(str(revision)) == {
        "commit": "abc123",
        "dirty": False,
        "source": "remote",
        "external": True,
    }
