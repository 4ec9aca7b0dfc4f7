"""Shared results are not silently code: recorded checkpoint paths and patches are checked (no Ray)."""

import json
import shutil
import subprocess

import pytest
from absl import logging as absl_logging

from rl.harness.commands import cli, reproduce, tensorboard_view
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import finder, records
from rl.harness.run.manifest import ExperimentRecord, RunManifest, read_manifest
from rl.harness.tests import run_helpers


@pytest.fixture
def roots(tmp_path):
    return tmp_path / "results", tmp_path / "artifacts"


def _run(roots, *args):
    return run_helpers.run_fake(*roots, *args)


def _plant_checkpoint(roots, folder):
    """A copy of a real checkpoint of the fake recipe, somewhere else (another user's, a download)."""
    shutil.copytree(roots[1] / "first" / "checkpoints" / "iter_000002", folder)
    (folder / "planted").write_text("this folder's pickles would run as whoever loads them\n")
    return folder


def _edit_last_checkpoint(roots, path):
    manifest_file = roots[0] / "first" / records.MANIFEST_FILE
    document = json.loads(manifest_file.read_text())
    document["checkpoints"][-1]["path"] = path
    manifest_file.write_text(json.dumps(document))


@pytest.mark.parametrize("recorded", ["{planted}", "../../planted", "checkpoints/../../../planted"])
def test_resuming_a_run_whose_manifest_leads_outside_its_artifacts_is_refused(
    roots, tmp_path, monkeypatch, capsys, recorded
):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    assert _run(roots, "--run-id", "first") == 0
    planted = _plant_checkpoint(roots, tmp_path / "planted")
    _edit_last_checkpoint(roots, recorded.format(planted=planted))
    capsys.readouterr()
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    assert _run(roots, "--run-id", "second", "--resume-from", "first") == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "restore it from git or B2" in error
    assert "not a path relative" in error or "leads outside the run's artifacts folder" in error
    assert not (roots[0] / "second").exists()


def test_resuming_from_a_checkpoint_outside_the_results_tree_names_it_in_one_log_line(
    roots, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    with run_helpers.absl_verbosity(absl_logging.WARNING):
        assert _run(roots, "--run-id", "first") == 0
        assert _run(roots, "--run-id", "inside", "--resume-from", "first") == 0
        assert "outside this run's results tree" not in caplog.text
        planted = _plant_checkpoint(roots, tmp_path / "downloads" / "iter_000002")
        monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
        assert _run(roots, "--run-id", "outside", "--resume-from", str(planted)) == 0
    lines = [line for line in caplog.text.splitlines() if "outside this run's results tree" in line]
    assert len(lines) == 1 and f"resuming from {planted}," in lines[0] and "a checkpoint is code" in lines[0]


# -- reproduce: a recorded patch is code -----------------------------------------------------------


def _git(folder, *args):
    return subprocess.run(
        ["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def shared_run(tmp_path):
    """A colleague's dirty run, committed results included: its patch adds a line to the recipe."""
    repo = tmp_path / "repo"
    (repo / "tiny").mkdir(parents=True)
    (repo / "tiny" / "recipe.py").write_text("def run(context):\n    return None\n")
    (repo / "README.md").write_text("tiny\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "tiny")
    commit = _git(repo, "rev-parse", "HEAD")
    (repo / "tiny" / "recipe.py").write_text(
        "import os\nos.system('touch /tmp/pwned')\ndef run(context):\n    return None\n"
    )
    (repo / "README.md").write_text("tiny, changed\n")
    run_dir = tmp_path / "results" / "shared-1"
    run_dir.mkdir(parents=True)
    (run_dir / records.PATCH_FILE).write_text(_git(repo, "diff", "HEAD") + "\n")
    _git(repo, "checkout", "-q", ".")

    def run(patch_record=None, **manifest_fields):
        code = {
            "experiment_repo": {
                "root": str(repo),
                "commit": commit,
                "dirty": True,
                "diff_sha256": "0" * 64,
                "patch": patch_record or {"file": records.PATCH_FILE},
            }
        }
        manifest = RunManifest(
            run_id="shared-1",
            status="completed",
            experiment=ExperimentRecord("tiny.recipe"),
            seed=0,
            options={"smoke": False},
            paths={"artifacts": str(tmp_path / "artifacts")},
            code=code,
            build={"target": "//tiny:recipe"},
            **manifest_fields,
        )
        return finder.Run(run_dir=str(run_dir), manifest=manifest)

    run.repo, run.run_dir = repo, run_dir
    return run


def test_reproduce_shows_the_files_a_patch_touches_and_refuses_code_without_trust(
    shared_run, tmp_path, capsys, monkeypatch
):
    scratch = tmp_path / "scratch"
    monkeypatch.setenv("RL_HARNESS_REPRODUCE_DIR", str(scratch))
    with pytest.raises(
        reproduce.ReproduceError, match=r"changes code or build files \(tiny/recipe.py\).*--trust-patch"
    ):
        reproduce.reproduce(shared_run(), repo_root=str(shared_run.repo))
    assert "touches 2 file(s): README.md, tiny/recipe.py" in capsys.readouterr().out
    assert not scratch.exists()  # nothing was checked out, patched, built or run


def test_reproduce_through_the_cli_refuses_an_untrusted_patch_in_one_line(shared_run, tmp_path, capsys, monkeypatch):
    shared = shared_run()
    records.write_json_atomically(str(shared_run.run_dir / records.MANIFEST_FILE), shared.manifest.to_dict())
    monkeypatch.setenv("RL_HARNESS_REPRODUCE_DIR", str(tmp_path / "scratch"))
    status = cli.main(["rl-harness", "reproduce", "shared-1", "--results-dir", str(tmp_path / "results")])
    assert status == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "pass --trust-patch" in error


def test_a_patch_of_documentation_only_needs_no_trust(shared_run, tmp_path):
    patch = tmp_path / "docs.patch"
    patch.write_text(
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-tiny\n+tiny!\n"
    )
    assert reproduce.check_patch_trust(str(patch), "r", trusted=False) == ["README.md"]


@pytest.mark.parametrize("name", ["requirements_lock.txt", "BUILD.bazel", "tiny/recipe.py", ".bazelrc", "x.sh"])
def test_code_and_build_files_are_code(name):
    assert reproduce.is_code(name)


@pytest.mark.parametrize("name", ["/etc/passwd", "../other/uncommitted.patch", "sub/uncommitted.patch", "..", ""])
def test_a_patch_file_must_be_a_plain_name_inside_the_run_folder(shared_run, name, capsys):
    with pytest.raises(reproduce.ReproduceError, match="not a file name inside its folder"):
        reproduce.reproduce(shared_run({"file": name}), repo_root=str(shared_run.repo), trust_patch=True)


def test_a_patch_file_that_is_a_link_is_refused(shared_run, tmp_path):
    outside = tmp_path / "outside.patch"
    outside.write_text("")
    (shared_run.run_dir / "linked.patch").symlink_to(outside)
    with pytest.raises(reproduce.ReproduceError, match="is a symbolic link"):
        reproduce.reproduce(shared_run({"file": "linked.patch"}), repo_root=str(shared_run.repo), trust_patch=True)


# -- records that name paths ---------------------------------------------------------------------


def _edit_manifest(run_dir, edit):
    manifest_file = run_dir / records.MANIFEST_FILE
    document = json.loads(manifest_file.read_text())
    edit(document)
    manifest_file.write_text(json.dumps(document))


def test_a_manifest_whose_experiment_module_is_not_a_dotted_name_is_not_read(roots, capsys):
    assert _run(roots, "--run-id", "first") == 0
    _edit_manifest(roots[0] / "first", lambda document: document["experiment"].update(module="../../escape"))
    with pytest.raises(records.RecordError, match="'../../escape' is not a dotted module name"):
        read_manifest(str(roots[0] / "first"))


def test_the_tensorboard_tree_keeps_every_link_inside_it(roots, tmp_path, capsys):
    assert _run(roots, "--run-id", "first") == 0
    assert _run(roots, "--run-id", "second") == 0
    events = run_helpers.manifest(roots[0] / "second")["paths"]["tensorboard"]
    escape = tmp_path / "escape" / ".."
    (escape / "tensorboard").mkdir(parents=True)  # a folder named `..`'s sibling the crafted path resolves to
    _edit_manifest(
        roots[0] / "second", lambda d: d["paths"].update(tensorboard=f"{events}/../../../escape/../tensorboard")
    )
    folders = tensorboard_view.events_folders(roots[0])
    tree = tmp_path / "tree"
    tree.mkdir()
    tensorboard_view.link_tree(folders, tree)
    links = [path for path in tmp_path.rglob("*") if path.is_symlink()]
    assert links and all(link.parent.resolve().is_relative_to(tree) for link in links), links
    assert "skipping run second: its records name" in capsys.readouterr().err


def test_link_tree_never_writes_through_another_runs_link(tmp_path, capsys):
    """A crafted run whose events folder is linked as `x/smoke`, beside a smoke run `x/smoke/<id>`."""
    crafted, smoke_run = tmp_path / "crafted" / "tensorboard", tmp_path / "art" / "smoke" / "r2" / "tensorboard"
    crafted.mkdir(parents=True)
    smoke_run.mkdir(parents=True)
    tree = tmp_path / "tree"
    tree.mkdir()
    tensorboard_view.link_tree({"x/smoke": crafted, "x/smoke/r2": smoke_run}, tree)
    assert list(crafted.iterdir()) == []  # nothing written inside the crafted run's folder
    assert "lies inside another run's linked events folder" in capsys.readouterr().err
