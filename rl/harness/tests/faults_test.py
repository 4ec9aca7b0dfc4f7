"""Faults made real (read-only mounts, a full tmpfs, two processes racing for one id, a study too big for the
machine) end in one line naming the folder and the fix, exit 2 or the run's recorded status, nothing left behind."""

import errno
import hashlib
import os
import pathlib
import pickle
import re
import shlex

import pytest

from rl.harness.commands import cli, execution
from rl.harness.errors import EXIT_FAILED, EXIT_USAGE
from rl.harness.run import records
from rl.harness.run.layout import RunFolderError, RunIdTaken, RunLayout
from rl.harness.run.manifest import read_manifest
from rl.harness.study import summary
from rl.harness.study.record import StudyRecord
from rl.harness.tests import mounts, run_helpers
from rl.harness.training import hardware


def _run(results, artifacts, *args, **env):
    return run_helpers.run_cli(
        [run_helpers.FAKE, "--smoke", "--results-dir", results, "--artifacts-dir", artifacts, *args], timeout=60, **env
    )


def _fill(folder: pathlib.Path) -> None:
    """Writes into `folder` until its file system is full."""
    handle = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(handle, bytes(4096))
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(handle)


@pytest.mark.parametrize("read_only", ["--results-dir", "--artifacts-dir"])
def test_a_read_only_folder_is_refused_before_any_record_and_the_id_stays_free(tmp_path, read_only):
    folders = {"--results-dir": tmp_path / "results", "--artifacts-dir": tmp_path / "artifacts"}
    with mounts.read_only(folders[read_only]):
        code, _, stderr = _run(folders["--results-dir"], folders["--artifacts-dir"], "--run-id", "r1")
    assert code == EXIT_USAGE, stderr
    assert stderr.strip().splitlines() == [
        (
            f"rl-harness: error: {read_only}: {folders[read_only]} is on a read-only file system, so"
            f" {folders[read_only] / 'smoke' / 'r1'} cannot be written; pass a writable {read_only}"
        )
    ]
    assert all(not (folder / "smoke").exists() for folder in folders.values())  # nothing left behind
    code, _, stderr = _run(folders["--results-dir"], folders["--artifacts-dir"], "--run-id", "r1")
    assert code == 0, stderr  # the id was not burned


def test_a_full_artifacts_disk_fails_the_run_in_one_line_naming_the_folder_and_its_free_space(tmp_path):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    with mounts.small(artifacts, "200k"):
        code, _, stderr = _run(
            results, artifacts, "--run-id", "r1", FAKE_RECIPE_OUTPUT_BYTES=400_000, FAKE_RECIPE_OUTPUT_PLACE="artifacts"
        )
        rows = records.read_json_lines(str(artifacts / "smoke" / "r1" / records.METRICS_FILE))
    assert code == EXIT_FAILED, stderr
    assert "Traceback" not in stderr
    [line] = [line for line in stderr.splitlines() if "no space left" in line]
    assert f"] run r1 failed: no space left on the device of {artifacts} (--artifacts-dir): " in line
    assert line.endswith(" free of 200 KiB; free space there or pass another --artifacts-dir")
    manifest = read_manifest(results / "smoke" / "r1")
    assert manifest.status == "failed" and manifest.error.type == "OSError"
    assert [row["training_iteration"] for row in rows] == [1, 2]  # what was written before stays


@pytest.mark.parametrize(
    "kind, said",
    [
        (
            "lost_actor",
            (
                "] run r1 failed: a process of the run died or stopped answering (The actor died unexpectedly "
                "before finishing this task.); continue the run from its last checkpoint with --resume-from r1"
            ),
        ),
        (
            "silent_actor",
            (
                "] run r1 failed: a process of the run died or stopped answering (no result from the actor within 1 "
                "s); continue the run from its last checkpoint with --resume-from r1"
            ),
        ),
        (
            "lost_actor_explained",
            "] run r1 failed: EnvRunners [1] died while sampling: continue the run (--resume-from)",
        ),
    ],
)
def test_a_lost_or_silent_ray_actor_fails_the_run_in_one_line_naming_resume(tmp_path, kind, said):
    code, _, stderr = _run(
        tmp_path / "results", tmp_path / "artifacts", "--run-id", "r1", FAKE_RECIPE_FAIL_AT=2, FAKE_RECIPE_FAIL_AS=kind
    )
    assert code == EXIT_FAILED, stderr
    assert "Traceback" not in stderr
    [line] = [line for line in stderr.splitlines() if "died" in line]
    assert line.endswith(said)
    error = "GetTimeoutError" if kind == "silent_actor" else "ActorDiedError"
    assert error in (tmp_path / "artifacts" / "smoke" / "r1" / execution.TRACEBACK_FILE).read_text()


def test_a_results_disk_full_at_the_start_refuses_the_run_and_keeps_nothing(tmp_path):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    with mounts.small(results, "200k"):
        _fill(results)
        code, _, stderr = _run(results, artifacts, "--run-id", "r1")
        assert code == EXIT_USAGE, stderr
        assert "Traceback" not in stderr
        # The free space is measured once the run's own folders are removed again: a block or two may be back.
        assert re.fullmatch(
            f"rl-harness: error: run r1 could not start \\(nothing was kept\\): no space left on the device of"
            f" {re.escape(str(results))} \\(--results-dir\\): [0-9]+ KiB free of 200 KiB; free space there or pass"
            " another --results-dir",
            stderr.strip().splitlines()[-1],
        )
        assert not (results / "smoke" / "r1").exists() and not (artifacts / "smoke" / "r1").exists()
        (results / "filler").unlink()
        code, _, stderr = _run(results, artifacts, "--run-id", "r1")
        assert code == 0, stderr  # the id was not burned


def test_of_two_runs_racing_for_one_id_one_runs_and_the_other_gets_one_line(tmp_path):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    for attempt in range(3):
        run_id = f"race{attempt}"
        args = [run_helpers.FAKE, "--smoke", "--results-dir", results, "--artifacts-dir", artifacts, "--run-id", run_id]
        racers = [run_helpers.start_cli(args) for _ in range(2)]
        outcomes = sorted((racer.wait(timeout=60), racer.communicate()[1]) for racer in racers)
        assert [code for code, _ in outcomes] == [0, EXIT_USAGE], outcomes
        loser = outcomes[1][1]
        assert "Traceback" not in loser
        assert loser.strip().splitlines()[-1] == (
            f"rl-harness: error: {results / 'smoke' / run_id} already exists; choose another --run-id (or omit it)"
        )
        assert read_manifest(results / "smoke" / run_id).status == "completed"


def _plan(tmp_path, run_id):
    options = cli.parse(
        [
            "rl-harness",
            run_helpers.FAKE,
            "--smoke",
            "--run-id",
            run_id,
            "--results-dir",
            str(tmp_path / "results"),
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
        ]
    )[1]
    return execution.plan_run(options, run_helpers.FAKE)


def test_the_claim_is_atomic_after_both_requests_passed_their_checks(tmp_path):
    first, second = _plan(tmp_path, "same"), _plan(tmp_path, "same")  # both validated: no folder existed yet
    assert execution.execute(first) == 0
    with pytest.raises(RunIdTaken, match="already exists; choose another --run-id"):
        execution.execute(second)
    assert read_manifest(first.layout.results_dir).status == "completed"  # the winner's records are untouched


def test_a_claim_that_finds_the_artifacts_folder_taken_leaves_no_results_folder(tmp_path):
    layout = RunLayout(tmp_path / "results", tmp_path / "artifacts", "r1", smoke=False)
    layout.artifacts_dir.mkdir(parents=True)
    with pytest.raises(RunIdTaken, match=str(layout.artifacts_dir)):
        layout.claim()
    assert not layout.results_dir.exists()


def test_a_claim_that_cannot_create_a_folder_names_it_and_leaves_nothing(tmp_path):
    layout = RunLayout(tmp_path / "results", tmp_path / "artifacts", "r1", smoke=True)
    # the artifacts folder gone read-only after the request was checked
    with mounts.read_only(tmp_path / "artifacts"), pytest.raises(RunFolderError) as raised:
        layout.claim()
    assert str(raised.value) == (
        f"cannot create {tmp_path / 'artifacts' / 'smoke'}: Read-only file system; pass a"
        " writable --results-dir and --artifacts-dir"
    )
    assert not layout.results_dir.exists()


def _study_options(tmp_path, *args):
    return cli.parse(
        [
            "rl-harness",
            "study",
            "rl.harness.tests.fake_study",
            "--results-dir",
            str(tmp_path / "results"),
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
            *args,
        ]
    )[1]


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            lambda cpus: ["--cpus-per-trial", str(cpus + 1)],
            lambda cpus: f"--cpus-per-trial {cpus + 1} exceeds the {cpus} CPU(s) this machine has",
        ),
        (
            lambda cpus: ["--max-concurrent", str(cpus + 1)],
            lambda cpus: f"--max-concurrent {cpus + 1} trials of 1 CPU(s) need {cpus + 1}, this machine has {cpus}",
        ),
    ],
)
def test_a_study_bigger_than_the_machine_is_refused_before_any_record(tmp_path, capsys, flags, message):
    cpus = hardware.usable_cpu_count()[0]
    assert cli.dispatch("study", _study_options(tmp_path, *flags(cpus))) == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and message(cpus) in error, error
    assert not (tmp_path / "results").exists()


def test_a_study_into_a_read_only_folder_is_refused_before_any_record(tmp_path, capsys):
    with mounts.read_only(tmp_path / "results"):
        assert cli.dispatch("study", _study_options(tmp_path)) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == (
        f"rl-harness: error: --results-dir: {tmp_path / 'results'} is on a read-only file system, so"
        f" {tmp_path / 'results'} cannot be written; pass a writable --results-dir"
    )


def test_a_full_disk_at_a_studys_summary_leaves_its_files_and_record_consistent_in_one_line(tmp_path, capsys):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    with mounts.small(results, "1m"):
        for run_id in ("a0", "b0"):
            assert run_helpers.run_fake(results, artifacts, "--run-id", run_id) == 0
        _fill(results)
        filler = results / "filler"
        os.truncate(filler, filler.stat().st_size - 24 * 1024)  # room for study.json, not for the summary's figure
        capsys.readouterr()
        assert (
            cli.main(
                [
                    "rl-harness",
                    "study",
                    "rl.harness.tests.fake_study",
                    "--results-dir",
                    str(results),
                    "--artifacts-dir",
                    str(artifacts),
                    "--study-id",
                    "full",
                    "--runs",
                    "first=a0",
                    "second=b0",
                ]
            )
            == EXIT_FAILED
        )
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        folder = results / "studies" / "full"
        assert len(lines) == 1 and re.fullmatch(
            rf"study full: its summary could not be written \(no space left on the device of {results}"
            r" \(--results-dir\): \d+ KiB free of 1.0 MiB\); study.json says failed, every member's run is kept;"
            r" make room there and write the summary with `(.+)`",
            lines[0],
        ), lines
        assert sorted(path.name for path in folder.iterdir()) == ["study.json"]  # no summary file, no temporary
        assert StudyRecord.read(folder).status == "failed"
        filler.unlink()
        words = shlex.split(re.search(r"`(.+)`", lines[0]).group(1))
        assert words[:3] == ["python", "-m", "rl.harness.commands.cli"]
        code, _stdout, stderr = run_helpers.run_cli(words[3:])
        assert code == 0, stderr
        assert StudyRecord.read(folder).status == "completed" and (folder / summary.CURVES_PNG).is_file()


def test_a_checkpoint_with_a_truncated_pickle_is_refused_in_one_line_before_any_record(tmp_path, capsys):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    assert run_helpers.run_fake(results, artifacts, "--run-id", "parent") == 0
    state = artifacts / "parent" / "checkpoints" / "iter_000005" / "learner" / "state.pkl"
    state.parent.mkdir()
    whole = pickle.dumps({"weights": list(range(1000))})
    state.write_bytes(whole[: len(whole) // 2])  # as a copy cut short, or a disk that filled up while saving
    capsys.readouterr()
    assert run_helpers.run_fake(results, artifacts, "--run-id", "child", "--resume-from", "parent") == EXIT_USAGE
    error = capsys.readouterr().err.strip()  # why pickletools stopped depends on where the cut falls
    assert re.fullmatch(
        re.escape(f"rl-harness: error: checkpoint {state.parents[1]} cannot be read: learner/state.pkl is damaged (")
        + r"[^()\n]+"
        + re.escape(
            "); pass --resume-from an earlier checkpoint folder of that run (its"
            " checkpoints/iter_N), or fetch the checkpoint again from B2 (docs/artifact_storage.md)"
        ),
        error,
    ), error
    assert not (results / "child").exists() and not (artifacts / "child").exists()


def _loose_recipe(folder: pathlib.Path, name: str, monkeypatch) -> str:
    """A recipe module `name` in `folder` (the fake recipe's run), importable from there."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text("from rl.harness.tests.fake_recipe import HYPERPARAMETERS, run  # noqa: F401\n")
    monkeypatch.syspath_prepend(str(folder))
    return name


@pytest.mark.parametrize(
    "where, reason",
    [
        ("outside git", r"fatal: not a git repository \(or any of the parent directories\): \.git"),
        ("a repository with no commit", r"the git repository at \S+ has no commit yet"),
    ],
)
def test_a_recipe_without_a_commit_is_refused_in_one_line_naming_the_fix(tmp_path, capsys, monkeypatch, where, reason):
    folder = tmp_path / "code"
    name = _loose_recipe(folder, f"loose_{where.replace(' ', '_')}", monkeypatch)
    if where != "outside git":
        run_helpers.git(folder, "init", "-q")
    capsys.readouterr()
    assert (
        cli.main(
            [
                "rl-harness",
                name,
                "--results-dir",
                str(tmp_path / "results"),
                "--artifacts-dir",
                str(tmp_path / "artifacts"),
                "--run-id",
                "loose",
            ]
        )
        == EXIT_USAGE
    )
    error = capsys.readouterr().err.strip()
    assert re.fullmatch(
        rf"rl-harness: error: {name} is not in a git checkout with a commit \({reason}\), so the run"
        r" could not record which code produced it; commit it \(git init, git add, git commit\), or"
        r" pass --allow-untracked-code to record the sha256 of each \.py file beside it instead",
        error,
    ), error
    assert not (tmp_path / "results" / "loose").exists()


def test_allow_untracked_code_runs_it_recorded_as_such_with_its_files_hashed(tmp_path, monkeypatch):
    folder = tmp_path / "code"
    name = _loose_recipe(folder, "loose_allowed", monkeypatch)
    (folder / "helper.py").write_text("HELPER = 1\n")
    assert (
        cli.main(
            [
                "rl-harness",
                name,
                "--results-dir",
                str(folder / "results"),
                "--artifacts-dir",
                str(folder / "artifacts"),
                "--run-id",
                "loose",
                "--allow-untracked-code",
            ]
        )
        == 0
    )
    manifest = read_manifest(folder / "results" / "loose")
    assert manifest.options["allow_untracked_code"] is True and manifest.code["experiment_repo"]["commit"] is None
    assert manifest.code["experiment_repo"]["untracked_sources"] == {
        "folder": str(folder),
        "left_out": 0,
        "files": {
            file: hashlib.sha256((folder / file).read_bytes()).hexdigest() for file in ("helper.py", f"{name}.py")
        },
    }  # the output roots beside it are left out


def test_a_study_without_a_commit_is_refused_before_any_record(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "loose_study.py").write_text("from rl.harness.tests.fake_study import STUDY  # noqa: F401\n")
    monkeypatch.syspath_prepend(str(folder))
    options = cli.parse(
        [
            "rl-harness",
            "study",
            "loose_study",
            "--results-dir",
            str(tmp_path / "results"),
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
        ]
    )[1]
    assert cli.dispatch("study", options) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == (
        "rl-harness: error: loose_study is not in a git checkout with a commit (fatal: not a git repository (or any of"
        " the parent directories): .git): a study compares its members by commit; commit the study and its recipes"
        " first (git init, git add, git commit)"
    )
    assert not (tmp_path / "results" / "studies").exists()
