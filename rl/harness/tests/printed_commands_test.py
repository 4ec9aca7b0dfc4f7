"""Every command the harness prints runs as printed from the repository root: under Bazel the generic binary
(`./bazelw run //rl/harness:rl-harness -- ...`, a target that exists), outside it `python -m rl.harness.commands.cli`,
which these tests run through that entry point (the study's resume: tests/member_trials_test.py)."""

import json
import pathlib
import re
import shlex

import pytest

from rl.harness import env_vars
from rl.harness.commands import catalog, cli, study
from rl.harness.run import buildinfo, finder
from rl.harness.run.manifest import RunManifest
from rl.harness.tests import run_helpers

REPO = pathlib.Path(__file__).resolve().parents[3]
PYTHON_FORM = ["python", "-m", "rl.harness.commands.cli"]


@pytest.fixture
def under_bazel(tmp_path, monkeypatch):
    """This process as an rl_py_binary of the generic target (its build identity in $RL_BUILD_INFO)."""
    info = tmp_path / "build_info.json"
    info.write_text(json.dumps({"build_hash": "h", "target": buildinfo.HARNESS_TARGET}))
    monkeypatch.setenv(env_vars.BUILD_INFO_ENV, str(info))


def _quoted_command(text: str) -> list[str]:
    """The one command in backticks in `text`, as words."""
    commands = re.findall(r"`([^`]+)`", text)
    assert len(commands) == 1, text
    return shlex.split(commands[0])


def test_the_bazel_form_names_a_target_that_exists():
    package, name = buildinfo.HARNESS_TARGET[2:].split(":")
    assert f'name = "{name}"' in (REPO / package / "BUILD.bazel").read_text()


def test_shows_not_found_names_the_runs_command_and_that_command_runs(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    assert cli.main(["rl-harness", "show", "20990101T000000Z-ffffff", "--results-dir", str(results)]) == 2
    words = _quoted_command(capsys.readouterr().err)
    assert words[:3] == PYTHON_FORM and words[3:] == ["runs"]
    code, _stdout, stderr = run_helpers.run_cli([*words[3:], "--results-dir", results])
    assert code == 0, stderr


def test_under_bazel_every_printed_command_is_the_generic_binarys(tmp_path, under_bazel):
    with pytest.raises(finder.RunNotFound) as found:
        finder.find_run("20990101T000000Z-ffffff", [str(tmp_path)])
    assert _quoted_command(str(found.value)) == ["./bazelw", "run", "//rl/harness:rl-harness", "--", "runs"]
    options = cli.parse(
        [
            "rl-harness",
            "study",
            "rl.harness.tests.fake_study",
            "--study-id",
            "s1",
            "--smoke",
            "--results-dir",
            str(tmp_path / "my results"),
            "--artifacts-dir",
            str(tmp_path / "a"),
        ]
    )[1]
    assert shlex.split(study.StudyCommand(options).resume_command()) == [
        "./bazelw",
        "run",
        "//rl/harness:rl-harness",
        "--",
        "study",
        "rl.harness.tests.fake_study",
        "--resume",
        "s1",
        "--smoke",
        "--results-dir",
        str(tmp_path / "my results"),
        "--artifacts-dir",
        str(tmp_path / "a"),
    ]


@pytest.mark.parametrize(
    "target, expected",
    [
        ("//experiments/x:recipe", ["./bazelw", "run", "//experiments/x:recipe", "--"]),  # its recipe implied
        (buildinfo.HARNESS_TARGET, ["./bazelw", "run", buildinfo.HARNESS_TARGET, "--", "experiments.x.recipe"]),
        (None, PYTHON_FORM + ["experiments.x.recipe"]),
    ],
)
def test_show_resumes_a_run_with_the_binary_it_ran_with_and_its_recipe_when_that_binary_needs_it(target, expected):
    record = {
        "schema_version": 3,
        "run_id": "r1",
        "status": "interrupted",
        "seed": 7,
        "experiment": {"module": "experiments.x.recipe"},
        "options": {"smoke": False},
        "paths": {},
        "build": {"built_with_bazel": target is not None, "target": target},
    }
    command = catalog.resume_command(finder.Run("/nowhere", RunManifest.from_dict(record)))
    assert shlex.split(command) == [*expected, "--resume-from", "r1", "--seed", "7"]
