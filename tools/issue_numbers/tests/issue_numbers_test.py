"""No issue number in the tracked text files of docs/, rl/, experiments/ and tools/; a planted one is found."""

import os
import pathlib
import subprocess

import pytest

from tools.issue_numbers import check_issue_numbers


def _checkout() -> pathlib.Path:
    """Under Bazel the runfile is a symlink into the source tree: its real path locates the checkout,
    whose git index says which files are tracked (the test is tagged `external`, so it always reruns)."""
    if "TEST_SRCDIR" not in os.environ:  # pytest run straight from the checkout
        return pathlib.Path(__file__).resolve().parents[3]
    runfiles = pathlib.Path(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    return pathlib.Path(os.path.realpath(runfiles / "WORKSPACE.bazel")).parent


CHECKOUT = _checkout()

# Built from pieces so that this file holds no issue number itself.
ISSUE = "issue"


def test_the_checkout_names_no_issue_numbers():
    paths = check_issue_numbers.tracked_text_files(CHECKOUT)
    assert {"docs/performance.md", "rl/BUILD.bazel", "tools/gpu_check.sh"} <= set(paths)
    mentions = check_issue_numbers.find_mentions(CHECKOUT, paths)
    assert not mentions, "\n".join(str(mention) for mention in mentions)


def _git(root: pathlib.Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    _git(tmp_path, "init", "-q")
    return tmp_path


def _track(root: pathlib.Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _git(root, "add", relative)


@pytest.mark.parametrize("phrase", [f"{ISSUE} 30", f"{ISSUE.title()} #30", f"{ISSUE}s 30 and 31", f"{ISSUE}30"])
def test_a_planted_issue_number_is_found_with_its_file_and_line(checkout, phrase):
    _track(checkout, "docs/guide.md", f"# Guide\n\nThe learner's third pass ({phrase}).\n")
    _track(checkout, "rl/envs/solver.py", "# no number here\n")
    paths = check_issue_numbers.tracked_text_files(checkout)
    (mention,) = check_issue_numbers.find_mentions(checkout, paths)
    assert (mention.path, mention.line) == ("docs/guide.md", 3)
    assert str(mention).startswith("docs/guide.md:3: names an issue number")


def test_every_scanned_folder_and_text_kind_is_read(checkout):
    planted = [
        f"{folder}/sub/file{suffix}"
        for folder in check_issue_numbers.SCANNED_FOLDERS
        for suffix in sorted(check_issue_numbers.TEXT_SUFFIXES)
    ]
    for relative in planted:
        _track(checkout, relative, f"x = 1\ny = 2  # {ISSUE} 7\n")
    mentions = check_issue_numbers.find_mentions(checkout, check_issue_numbers.tracked_text_files(checkout))
    assert sorted((m.path, m.line) for m in mentions) == sorted((path, 2) for path in planted)


def test_untracked_files_binaries_and_other_folders_are_not_scanned(checkout):
    _track(checkout, "experiments/results/plot.png", f"{ISSUE} 30")
    _track(checkout, "README.md", f"{ISSUE} 30")  # outside the scanned folders
    (checkout / "docs").mkdir()
    (checkout / "docs" / "draft.md").write_text(f"{ISSUE} 30")  # not tracked
    assert check_issue_numbers.tracked_text_files(checkout) == []


@pytest.mark.parametrize("text", [f"a t{ISSUE} 3 mm thick", "github.com/ray-project/ray/issues/30", "issues = 3"])
def test_words_that_only_resemble_an_issue_number_pass(checkout, text):
    _track(checkout, "tools/note.md", text + "\n")
    assert check_issue_numbers.find_mentions(checkout, check_issue_numbers.tracked_text_files(checkout)) == []


def test_the_command_names_each_mention_and_fails(checkout, capsys):
    _track(checkout, "tools/run.sh", f"#!/bin/sh\n# GPU check ({ISSUE} 18)\n")
    assert check_issue_numbers.main([str(checkout)]) == 1
    assert capsys.readouterr().out.startswith("tools/run.sh:2: names an issue number")


def test_outside_a_git_checkout_the_command_says_so_in_one_line(tmp_path, capsys):
    assert check_issue_numbers.main([str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "run the check in a git checkout" in error
