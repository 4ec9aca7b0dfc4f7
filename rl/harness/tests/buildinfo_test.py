import json

import pytest

from rl.harness import env_vars
from rl.harness.run import buildinfo


def test_outside_a_binary_there_is_no_invented_hash(monkeypatch):
    monkeypatch.delenv(env_vars.BUILD_INFO_ENV, raising=False)
    info = buildinfo.current()
    assert not info.built_with_bazel and info.build_hash is None
    assert env_vars.BUILD_INFO_ENV in info.reason


def test_reads_build_info_and_stamp(monkeypatch, tmp_path):
    info_path = tmp_path / "info.json"
    info_path.write_text(json.dumps({"build_hash": "ab" * 32, "lock_sha256": "cd" * 32, "target": "//x:y"}))
    stamp_path = tmp_path / "stamp.json"
    stamp_path.write_text(json.dumps({"git_commit": "deadbeef", "git_dirty": True}))
    monkeypatch.setenv(env_vars.BUILD_INFO_ENV, str(info_path))
    monkeypatch.setenv(env_vars.BUILD_STAMP_ENV, str(stamp_path))
    info = buildinfo.current()
    assert info.build_hash == "ab" * 32 and info.git_commit == "deadbeef" and info.git_dirty is True
    assert info.as_dict()["target"] == "//x:y"


def test_corrupt_build_info_names_the_fix(monkeypatch, tmp_path):
    bad = tmp_path / "info.json"
    bad.write_text("{not json")
    monkeypatch.setenv(env_vars.BUILD_INFO_ENV, str(bad))
    monkeypatch.delenv(env_vars.BUILD_STAMP_ENV, raising=False)
    with pytest.raises(buildinfo.BuildInfoError, match="rebuild the binary"):
        buildinfo.current()
