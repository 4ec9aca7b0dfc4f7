"""Shared results never run code: each attack on a run someone shares, made as an attacker would.

The attacker edits what they share (a run's manifest, its patch, a folder beside it); the victim
reproduces or resumes it with the documented commands. Each test asserts the attack's effect (a
file created outside, a pickle loaded, events written elsewhere) does not appear, and the victim
gets one line naming the problem (exit 2). Reproduce builds with `tests/fake_bazel.py`, which runs
`--workspace_status_command` as Bazel does.
"""

import json
import os
import pathlib
import pickle
import shutil
import sys

import pytest

from rl.harness.commands import cli, reproduce
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import records
from rl.harness.tests import fake_bazel, run_helpers

RECIPE = "from rl.harness.tests.fake_recipe import HYPERPARAMETERS, run  # noqa: F401\n"


class Marker:
    """A pickle that, when loaded, creates `path`: what a planted checkpoint does to whoever loads it."""

    def __init__(self, path: pathlib.Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """A committed checkout with a tiny recipe and one clean run of it, as a colleague shares them."""
    repo = run_helpers.committed_repo(
        tmp_path / "repo", {"requirements_lock.txt": "numpy==2.0.0\n", ".gitignore": "bazel-*\n__pycache__/\n"}
    )
    (repo / "tiny").mkdir()
    (repo / "tiny" / "__init__.py").write_text("")
    (repo / "tiny" / "recipe.py").write_text(RECIPE)
    run_helpers.git(repo, "add", ".")
    run_helpers.git(repo, "commit", "-q", "-m", "tiny recipe")
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(repo))
    monkeypatch.setenv("RL_HARNESS_BAZEL", f"{sys.executable} {os.path.abspath(fake_bazel.__file__)}")
    monkeypatch.setenv("RL_HARNESS_REPRODUCE_DIR", str(tmp_path / "scratch"))
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    monkeypatch.setenv("FAKE_RECIPE_PICKLE", "1")
    results, artifacts = repo / "tiny" / "results", repo / "tiny" / "artifacts"
    code, _, error = run_helpers.run_cli(
        [
            "tiny.recipe",
            "--run-id",
            "20261206T000000Z-shared",
            "--results-dir",
            str(results),
            "--artifacts-dir",
            str(artifacts),
            "--no-upload-artifacts",
        ],
        PYTHONPATH=os.pathsep.join([str(repo), *sys.path]),
        RL_BUILD_INFO=fake_bazel.build(str(repo), "//tiny:recipe"),
    )
    assert code == 0, error[-2000:]
    run_dir = results / "20261206T000000Z-shared"
    (run_dir / records.MANIFEST_FILE).chmod(0o644)
    return repo, run_dir, artifacts / "20261206T000000Z-shared"


def _edit(run_dir, edit):
    path = run_dir / records.MANIFEST_FILE
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))


def _resume(run_dir, artifacts_dir, run_id, monkeypatch):
    """The victim resumes the shared run with its own recipe, in this process."""
    monkeypatch.syspath_prepend(str(run_dir.parents[2]))
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    return cli.main(
        [
            "rl-harness",
            "tiny.recipe",
            "--results-dir",
            str(run_dir.parent),
            "--artifacts-dir",
            str(artifacts_dir.parent),
            "--no-upload-artifacts",
            "--run-id",
            run_id,
            "--resume-from",
            run_dir.name,
        ]
    )


def _one_line_refusal(capsys, status):
    assert status == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0, error
    return error


def test_a_patch_that_edits_code_is_refused_when_reproduce_runs_inside_another_repository(
    shared, tmp_path, monkeypatch, capsys
):
    """Under `bazel run` the command runs in Bazel's runfiles tree, inside a repository of its own."""
    repo, run_dir, _ = shared
    marker = tmp_path / "pwned"
    (repo / "tiny" / "recipe.py").write_text(f"open({str(marker)!r}, 'w')\n" + RECIPE)
    (repo / "BUILD.bazel").write_text(f"genrule(name='x', outs=['x'], cmd='touch {marker}')\n")
    run_helpers.git(repo, "add", "-N", "BUILD.bazel")
    (run_dir / records.PATCH_FILE).write_text(run_helpers.git(repo, "diff", "HEAD", "--binary"))
    run_helpers.git(repo, "reset", "-q")
    run_helpers.git(repo, "checkout", "-q", ".")
    (repo / "BUILD.bazel").unlink()
    _edit(run_dir, lambda d: d["code"]["experiment_repo"].update(dirty=True))
    runfiles = run_helpers.committed_repo(tmp_path / "execroot", {"MANIFEST": "runfiles\n"}) / "tiny.runfiles"
    runfiles.mkdir()
    monkeypatch.chdir(runfiles)
    error = _one_line_refusal(
        capsys, cli.main(["rl-harness", "reproduce", run_dir.name, "--results-dir", str(run_dir.parent)])
    )
    assert "changes code or build files (BUILD.bazel, tiny/recipe.py)" in error and "--trust-patch" in error
    assert not marker.exists()


def test_a_recorded_target_that_is_a_bazel_option_never_reaches_bazel(shared, tmp_path, capsys):
    _repo, run_dir, _ = shared
    marker = tmp_path / "pwned"
    _edit(run_dir, lambda d: d["build"].update(target=f"--workspace_status_command=touch {marker}"))
    error = _one_line_refusal(
        capsys, cli.main(["rl-harness", "reproduce", run_dir.name, "--results-dir", str(run_dir.parent)])
    )
    assert "is not a Bazel label" in error and "restore it from git or B2" in error
    assert not marker.exists()


def test_reproduce_names_the_commit_the_target_and_the_patch_before_building(shared, capsys):
    repo, run_dir, _ = shared
    (repo / "NOTES.md").write_text("what I tried\n")
    run_helpers.git(repo, "add", "-N", "NOTES.md")
    (run_dir / records.PATCH_FILE).write_text(run_helpers.git(repo, "diff", "HEAD", "--binary"))
    _edit(run_dir, lambda d: d["code"]["experiment_repo"].update(dirty=True, diff_sha256="0" * 64))
    cli.main(["rl-harness", "reproduce", run_dir.name, "--results-dir", str(run_dir.parent)])
    printed = capsys.readouterr().out.splitlines()
    commit = json.loads((run_dir / records.MANIFEST_FILE).read_text())["code"]["experiment_repo"]["commit"]
    assert printed[0] == f"reproducing run {run_dir.name}: commit {commit}, target //tiny:recipe"
    assert printed[1].endswith("touches 1 file(s): NOTES.md")


def test_a_non_empty_patch_whose_listing_names_no_file_fails_closed(shared, tmp_path, monkeypatch, capsys):
    """A `git` that reads patches from inside a repository's subfolder (what made the gate list nothing)."""
    _, run_dir, _ = shared
    inside = run_helpers.committed_repo(tmp_path / "other", {"README": "x\n"}) / "sub"
    inside.mkdir()
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\ncd {inside} && GIT_CEILING_DIRECTORIES= exec {shutil.which("git")} "$@"\n')
    wrapper.chmod(0o755)
    patch = tmp_path / "code.patch"
    patch.write_text(
        "diff --git a/BUILD.bazel b/BUILD.bazel\nnew file mode 100644\n--- /dev/null\n+++ b/BUILD.bazel\n"
        "@@ -0,0 +1 @@\n+genrule(name='x', outs=['x'], cmd='touch /tmp/x')\n"
    )
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(reproduce.ReproduceError, match="not empty but git reads no file in it"):
        reproduce.check_patch_trust(str(patch), run_dir.name, trusted=False)


def _plant(run_dir, artifacts_dir, planted_root, marker):
    """The checkpoint folder moved to a planted root the manifest names, its state replaced by a hostile pickle."""
    planted = planted_root / artifacts_dir.name
    planted.parent.mkdir(parents=True)
    artifacts_dir.rename(planted)
    for state in planted.rglob("fake_state.pkl"):
        state.write_bytes(pickle.dumps(Marker(marker)))
    _edit(run_dir, lambda d: d["paths"].update(artifacts=str(planted)))


def test_a_planted_checkpoint_named_by_a_shared_record_is_never_loaded(shared, tmp_path, capsys, monkeypatch):
    repo, run_dir, artifacts_dir = shared
    marker = tmp_path / "pwned"
    _plant(run_dir, artifacts_dir, repo / "tiny" / "planted", marker)
    error = _one_line_refusal(capsys, _resume(run_dir, artifacts_dir, "20261206T000001Z-victim", monkeypatch))
    assert f"checkpoint checkpoints/iter_000002 of run {run_dir.name} is not on this machine" in error
    assert not marker.exists()


def test_a_parents_recorded_events_folder_outside_the_artifacts_root_is_never_written(shared, tmp_path, monkeypatch):
    _, run_dir, artifacts_dir = shared
    outside = tmp_path / "elsewhere" / "tensorboard"
    outside.mkdir(parents=True)
    (outside / "events.out.tfevents.1.keep").write_bytes(b"another program's events")
    _edit(run_dir, lambda d: d["paths"].update(tensorboard=str(outside)))
    assert _resume(run_dir, artifacts_dir, "20261206T000002Z-resume", monkeypatch) == 0
    assert [path.name for path in outside.iterdir()] == ["events.out.tfevents.1.keep"]
    assert (outside / "events.out.tfevents.1.keep").read_bytes() == b"another program's events"
    resumed = run_helpers.manifest(run_dir.parent / "20261206T000002Z-resume")
    assert resumed["paths"]["tensorboard"] == str(artifacts_dir.parent / "20261206T000002Z-resume" / "tensorboard")
