"""tools/rules/venv_cache.py: one venv per interpreter x lock, found again by every clone, built once."""

import json
import multiprocessing
import pathlib
import time

import pytest

from tools.rules import venv_cache

IDENTITY = {
    "version": "3.11.7",
    "implementation": "cpython",
    "executable": "/usr/bin/python3.11",
    "executable_sha256": "a" * 64,
    "libpython_sha256": None,
    "lock_sha256": "b" * 64,
}


def test_key_depends_on_what_the_venv_is_built_from_only():
    key = venv_cache.venv_key(IDENTITY)
    assert venv_cache.venv_key(dict(reversed(list(IDENTITY.items())))) == key
    # Where the interpreter lies does not change what is installed; its bytes and the lock do.
    assert venv_cache.venv_key({**IDENTITY, "executable": "/elsewhere/python3.11"}) == key
    assert venv_cache.venv_key({**IDENTITY, "lock_sha256": "c" * 64}) != key
    assert venv_cache.venv_key({**IDENTITY, "executable_sha256": "d" * 64}) != key
    assert venv_cache.venv_key({**IDENTITY, "version": "3.11.8"}) != key


def test_a_new_build_format_makes_a_new_venv(monkeypatch):
    key = venv_cache.venv_key(IDENTITY)
    monkeypatch.setattr(venv_cache, "BUILD_FORMAT", venv_cache.BUILD_FORMAT + 1)
    assert venv_cache.venv_key(IDENTITY) != key


def test_an_identity_without_the_lock_hash_is_refused():
    with pytest.raises(SystemExit, match="lock_sha256"):
        venv_cache.venv_key({key: value for key, value in IDENTITY.items() if key != "lock_sha256"})


def _fake_build(log: pathlib.Path):
    def build(folder, lock):
        with open(log, "a") as handle:
            handle.write(f"{folder.name}\n")
        time.sleep(0.3)  # long enough for a second builder to arrive while the first holds the lock
        (folder / "bin").mkdir(parents=True)
        (folder / venv_cache.COMPLETE_MARKER).write_text(lock.name)

    return build


def test_a_complete_venv_is_reused_and_an_interrupted_one_rebuilt(tmp_path, monkeypatch):
    lock = tmp_path / "requirements_lock.txt"
    lock.write_text("numpy==2.0 --hash=sha256:00\n")
    log = tmp_path / "builds.log"
    monkeypatch.setattr(venv_cache, "build", _fake_build(log))
    cache = tmp_path / "venvs"
    key = venv_cache.venv_key(IDENTITY)

    python = venv_cache.ensure(cache, lock, key)
    assert python == cache / f"requirements_lock-{key[:16]}" / "bin" / "python3"
    assert venv_cache.ensure(cache, lock, key) == python
    assert log.read_text().splitlines() == [python.parent.parent.name]

    (python.parent.parent / venv_cache.COMPLETE_MARKER).unlink()  # as a build killed midway leaves it
    venv_cache.ensure(cache, lock, key)
    assert len(log.read_text().splitlines()) == 2


def _ensure_in_child(cache, lock, key, log):
    venv_cache.build = _fake_build(log)
    venv_cache.ensure(cache, lock, key)


def test_two_processes_asking_at_once_build_it_once(tmp_path):
    lock = tmp_path / "requirements_lock.txt"
    lock.write_text("numpy==2.0 --hash=sha256:00\n")
    log = tmp_path / "builds.log"
    key = venv_cache.venv_key(IDENTITY)
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_ensure_in_child, args=(tmp_path / "venvs", lock, key, log)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    assert len(log.read_text().splitlines()) == 1


def test_the_command_prints_the_python_of_the_cached_venv(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "requirements_lock.txt"
    lock.write_text("numpy==2.0 --hash=sha256:00\n")
    monkeypatch.setattr(venv_cache, "build", _fake_build(tmp_path / "builds.log"))
    monkeypatch.setattr(
        "sys.argv",
        [
            "venv_cache.py",
            "--lock",
            str(lock),
            "--cache-root",
            str(tmp_path / "venvs"),
            "--identity",
            json.dumps(IDENTITY),
        ],
    )
    venv_cache.main()
    printed = pathlib.Path(capsys.readouterr().out.strip())
    assert printed.parts[-2:] == ("bin", "python3") and (printed.parent.parent / "COMPLETE").is_file()
