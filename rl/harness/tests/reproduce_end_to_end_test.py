"""Slow: `rl-harness reproduce` end to end on a tiny recipe committed to a temporary git repository.

Bazel cannot run inside this test's sandbox, so `tests/fake_bazel.py` ($RL_HARNESS_BAZEL) stands
in for it: it hashes the checkout's sources with the real tools/build_info/compute.py and runs
the recipe through the harness CLI in a subprocess. Everything else is the real command:
scratch worktree at the recorded commit, saved patch, build comparison, run, row comparison.

The tiny recipe wraps tests/fake_recipe.py (no RLlib; seeded noise) and declares itself
deterministic, so a faithful reproduction is "identical".
"""

import os
import subprocess
import sys

import pytest

from rl.harness.commands import cli
from rl.harness.run import records
from rl.harness.tests import fake_bazel

TARGET = "//tiny:recipe"
RECIPE = '''"""A tiny deterministic recipe: fake_recipe's loop, one process, noise from the seed streams."""
from rl.harness.run.manifest import OwnLoopRunner
from rl.harness.tests import fake_recipe

STEPS_PER_ITERATION = 100


def run(context):
    context.recorder.record_runner(OwnLoopRunner(kind="own loop", details={"determinism": {
        "expected": True, "why": "one process; noise from the seed streams"}}))
    fake_recipe.STEPS_PER_ITERATION = STEPS_PER_ITERATION
    return fake_recipe.run(context)
'''


def _git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A checkout holding the tiny recipe; its runs' results and artifacts go inside it, untracked."""
    folder = tmp_path / "repo"
    (folder / "tiny").mkdir(parents=True)
    (folder / "tiny" / "__init__.py").write_text("")
    (folder / "tiny" / "recipe.py").write_text(RECIPE)
    (folder / "requirements_lock.txt").write_text("numpy==2.0.0\n")
    (folder / ".gitignore").write_text("bazel-*\n__pycache__/\n")  # as a real checkout ignores them
    _git(folder, "init", "-q")
    _git(folder, "add", ".")
    _git(folder, "commit", "-q", "-m", "tiny recipe")
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(folder))
    monkeypatch.setenv("RL_HARNESS_BAZEL", f"{sys.executable} {os.path.abspath(fake_bazel.__file__)}")
    monkeypatch.setenv("RL_HARNESS_REPRODUCE_DIR", str(tmp_path / "scratch"))
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    return folder


def _results(repo):
    return repo / "tiny" / "results"


def _run(repo, run_id):
    """The original run, as `bazel run //tiny:recipe -- ...` would start it."""
    done = subprocess.run([*os.environ["RL_HARNESS_BAZEL"].split(), "run", TARGET, "--", "--seed", "7",
                           "--run-id", run_id, "--results-dir", str(_results(repo)),
                           "--artifacts-dir", str(repo / "tiny" / "artifacts")],
                          cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return _record(_results(repo) / run_id)


def _reproduce(repo, capsys, run_id, *flags):
    """(exit status, printed verdict, the reproduction's manifest)."""
    status = cli.main(["rl-harness", "reproduce", run_id, "--results-dir", str(_results(repo)), *flags])
    printed = capsys.readouterr().out
    verdict = printed[printed.index("reproduction "):]
    new_run_id = verdict.split()[1]  # "reproduction <new id> of <run id>: ..."
    return status, printed, _record(_results(repo) / new_run_id)


def _record(run_dir):
    """The manifest as written on disk (its JSON), which these tests edit and compare."""
    return records.read_json(str(run_dir / records.MANIFEST_FILE), "run manifest")


def _rows(manifest):
    return records.read_json_lines(os.path.join(manifest["paths"]["artifacts"], records.METRICS_FILE))


def test_a_clean_run_reproduces_identically_and_a_prefix_stops_the_reproduction(repo, capsys):
    original = _run(repo, "20261202T000000Z-clean1")
    # its results/ and artifacts/ are outputs, not a change
    assert original["code"]["experiment_repo"]["dirty"] is False, _git(repo, "status", "--porcelain")

    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    assert status == 0, printed
    assert "identical expected" in printed and "build hash: same" in printed and "verdict: identical" in printed
    verdict = reproduction["reproduction"]
    assert (verdict["parent_run"], verdict["build_hash_match"], verdict["rows_compared"]) == (original["run_id"], True, 4)
    assert reproduction["build"]["build_hash"] == original["build"]["build_hash"]

    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"], "--iterations", "2")
    assert status == 0 and "rows compared: 2" in printed, printed
    assert [row["training_iteration"] for row in _rows(reproduction)] == [1, 2]  # stopped, not run to 4 and cut
    assert reproduction["budget_cap"] == {"key": "training_iteration", "bound": 2}
    assert reproduction["status"] == "completed"
    assert reproduction["reproduction"]["prefix"] == {"key": "training_iteration", "bound": 2}


def test_a_changed_source_file_is_named_in_the_build_mismatch(repo, capsys):
    """The edit is simulated in the recorded manifest.

    A reproduction rebuilds the recorded commit (plus its patch), so an edit committed or made
    afterwards never reaches it: the recorded per-file hash of tiny/recipe.py is changed instead,
    as if the run had been built from an edited file that neither the commit nor the patch holds.
    """
    original = _run(repo, "20261202T000000Z-edit01")
    run_dir = _results(repo) / original["run_id"]
    build = original["build"]
    edited = {**original, "build": {**build, "build_hash": "0" * 64,
                                    "sources": {**build["sources"], "tiny/recipe.py": "f" * 64}}}
    records.write_json_atomically(str(run_dir / records.MANIFEST_FILE), edited)

    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    assert "build hash: DIFFERENT" in printed and "source file tiny/recipe.py: content differs" in printed, printed
    assert reproduction["reproduction"]["build_differences"] == ["source file tiny/recipe.py: content differs"]
    assert status == 0  # the rows still agree: the simulated edit changed nothing that ran


def test_a_dirty_run_reproduces_from_its_patch(repo, capsys):
    _run(repo, "20261202T000000Z-before")  # its untracked results must stay out of the next run's patch
    recipe = repo / "tiny" / "recipe.py"
    recipe.write_text(recipe.read_text().replace("STEPS_PER_ITERATION = 100", "STEPS_PER_ITERATION = 50"))
    (repo / "tiny" / "helper.py").write_text("UNUSED = 1\n")
    original = _run(repo, "20261202T000000Z-dirty1")
    state = original["code"]["experiment_repo"]
    assert state["dirty"] is True and state["patch"]["omitted"] == []
    patch = (_results(repo) / original["run_id"] / records.PATCH_FILE).read_bytes()
    assert b"tiny/helper.py" in patch and b"metrics.jsonl" not in patch
    recipe.write_text(RECIPE)  # the checkout moves on; the reproduction must not see it
    (repo / "tiny" / "helper.py").unlink()

    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"], "--trust-patch")
    assert "touches 2 file(s): tiny/helper.py, tiny/recipe.py" in printed, printed
    assert status == 0 and "patch: recreates the recorded change" in printed and "verdict: identical" in printed, printed
    assert reproduction["reproduction"]["patch_verified"] is True
    assert reproduction["build"]["build_hash"] == original["build"]["build_hash"]
    assert [row["num_env_steps_sampled_lifetime"] for row in _rows(reproduction)] == [50, 100, 150, 200]
