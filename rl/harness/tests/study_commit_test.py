"""`study --resume <id>` from a checkout that is not the study's: its commit resumes it, in a scratch worktree.

The study and its recipe live in a temporary git repository. Bazel cannot run inside this test's
sandbox, so `tests/fake_bazel.py` ($RL_HARNESS_BAZEL) stands in for it: it builds with the real
tools/build_info/compute.py and runs the harness CLI from the worktree. Everything else is the real
command: the study recorded at one commit, the checkout moved to another and dirtied, `--resume
--seeds` run from there (slow: Ray Tune runs the members), and the refusals (fast).
"""

import json
import os
import subprocess
import sys

import pytest

from rl.harness.commands import cli
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import records
from rl.harness.study.record import StudyRecord
from rl.harness.tests import fake_bazel, run_helpers

RECIPE = '''"""The fake recipe, as a recipe of this repository (its runs record this repository's commit)."""
from rl.harness.tests.fake_recipe import HYPERPARAMETERS, run  # noqa: F401
'''
STUDY = """from rl.harness.study import Score, Study

STUDY = Study(agents={"first": "tiny.recipe", "second": "tiny.recipe"}, seeds=(0,),
              scores=(Score("last loss", "last_loss"),), pairs=(("first", "second"),), curve="fake/loss")
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    folder = run_helpers.committed_repo(
        tmp_path / "repo", {"requirements_lock.txt": "numpy==2.0.0\n", ".gitignore": "bazel-*\n__pycache__/\n"}
    )
    (folder / "tiny").mkdir()
    for name, text in (("__init__.py", ""), ("recipe.py", RECIPE), ("study.py", STUDY)):
        (folder / "tiny" / name).write_text(text)
    run_helpers.git(folder, "add", ".")
    run_helpers.git(folder, "commit", "-q", "-m", "tiny study")
    monkeypatch.syspath_prepend(str(folder))
    for name in [name for name in sys.modules if name.partition(".")[0] == "tiny"]:  # another test's repository
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(folder))
    monkeypatch.setenv("RL_HARNESS_BAZEL", f"{sys.executable} {os.path.abspath(fake_bazel.__file__)}")
    monkeypatch.setenv("RL_HARNESS_REPRODUCE_DIR", str(tmp_path / "scratch"))
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    return folder


def _folders(repo):
    return ["--results-dir", str(repo.parent / "results"), "--artifacts-dir", str(repo.parent / "artifacts")]


def _move_on(repo):
    """A later commit with another recipe, and an uncommitted change on top."""
    (repo / "tiny" / "recipe.py").write_text(RECIPE + "LATER = True\n")
    run_helpers.git(repo, "commit", "-q", "-am", "later")
    (repo / "tiny" / "notes.py").write_text("UNCOMMITTED = 1\n")


def _record(repo, study_id, **code):
    """A study recorded at the repository's commit (no member run yet)."""
    from rl.harness.commands.study import load_study

    commit = run_helpers.git(repo, "rev-parse", "HEAD").strip()
    state = {"commit": commit, "dirty": False, "diff_sha256": None, **code}
    record = StudyRecord.new(
        study_id,
        module="tiny.study",
        study=load_study("tiny.study"),
        smoke=True,
        code={"experiment_repo": state, "library": state},
        build={"lock_sha256": "f00"},
        command_line=["rl-harness", "study", "tiny.study"],
    )
    record.write(repo.parent / "results" / records.SMOKE_DIR / "studies" / study_id)


def _resume(repo, study_id, *flags):
    return cli.main(["rl-harness", "study", "tiny.study", "--smoke", "--resume", study_id, *_folders(repo), *flags])


def test_a_study_whose_commit_the_repository_lacks_is_refused_in_one_line(repo, capsys):
    _record(repo, "lost", commit="0" * 40)
    assert _resume(repo, "lost", "--seeds", "1-2") == EXIT_USAGE
    assert f"commit {'0' * 40} of study lost is not in {repo}; fetch it" in run_helpers.one_error_line(capsys)
    assert run_helpers.git(repo, "worktree", "list").count("\n") == 1  # no worktree left behind


def test_a_study_run_from_uncommitted_changes_is_refused_in_one_line(repo, capsys):
    _record(repo, "patched", dirty=True, diff_sha256="ab" * 32)
    _move_on(repo)
    assert _resume(repo, "patched", "--seeds", "1") == EXIT_USAGE
    assert "study patched ran from uncommitted changes to commit" in run_helpers.one_error_line(capsys)


def test_the_studys_commit_that_still_differs_refuses_rather_than_checking_itself_out_again(repo, capsys, monkeypatch):
    _record(repo, "again")
    _move_on(repo)
    monkeypatch.setenv("RL_HARNESS_AT_STUDY_COMMIT", "1")  # as the study's commit's own build is started
    assert _resume(repo, "again", "--seeds", "1") == EXIT_USAGE
    assert "study again cannot resume at its commit: its code (" in run_helpers.one_error_line(capsys)
    assert run_helpers.git(repo, "worktree", "list").count("\n") == 1


def _manifest(repo, run_id):
    return records.read_json(
        str(repo.parent / "results" / records.SMOKE_DIR / run_id / records.MANIFEST_FILE), "run manifest"
    )


@pytest.mark.slow
def test_more_seeds_from_a_dirty_checkout_at_another_commit_run_at_the_studys_commit(repo, capsys):
    harness = [*os.environ["RL_HARNESS_BAZEL"].split(), "run", fake_bazel.HARNESS_TARGET, "--"]
    started = subprocess.run(
        [*harness, "study", "tiny.study", "--smoke", "--study-id", "grow", "--max-concurrent", "1", *_folders(repo)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    study_commit = run_helpers.git(repo, "rev-parse", "HEAD").strip()
    _move_on(repo)
    checkout_commit = run_helpers.git(repo, "rev-parse", "HEAD").strip()

    assert _resume(repo, "grow", "--seeds", "1-2", "--max-concurrent", "1") == 0
    printed = capsys.readouterr().out
    assert f"study grow ran at commit {study_commit[:12]}, this checkout is not that" in printed
    folder = repo.parent / "results" / records.SMOKE_DIR / "studies" / "grow"
    record = StudyRecord.read(folder)
    assert [(m.agent, m.seed, m.status) for m in record.members] == [
        (agent, seed, "completed") for seed in (0, 1, 2) for agent in ("first", "second")
    ]
    assert record.grid["seeds"] == [0, 1, 2] and record.status == "completed"
    for member in record.members:
        code = _manifest(repo, member.last_run)["code"]["experiment_repo"]
        assert (code["commit"], code["dirty"]) == (study_commit, False) != (checkout_commit, True)
    summary = json.loads((folder / "summary.json").read_text())
    assert sorted(summary["agents"]["first"]["scores"]["last loss"]["values"]) == ["0", "1", "2"]
    assert run_helpers.git(repo, "worktree", "list").count("\n") == 1  # the scratch worktree is released
    assert (repo / "tiny" / "notes.py").exists()  # the checkout itself is left as it was
