"""The CLI on a fake recipe (no RLlib): records, provenance, locations, resume, bad input, catalog."""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

from rl.harness import errors
from rl.harness.commands import arguments, cli
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import records
from rl.harness.run.manifest import MANIFEST_SCHEMA_VERSION
from rl.harness.tests import run_helpers

FAKE = run_helpers.FAKE


@pytest.fixture
def roots(tmp_path):
    return tmp_path / "results", tmp_path / "artifacts"


def _run(roots, *args):
    results, artifacts = roots
    return cli.main(["rl-harness", FAKE, "--results-dir", str(results), "--artifacts-dir", str(artifacts), *args])


def test_rllibs_env_runner_is_one_flag_away_and_recorded(roots):
    assert _run(roots, "--run-id", "rllib-runner", "--env-runner", "rllib") == 0
    manifest = run_helpers.manifest(roots[0] / "rllib-runner")
    assert manifest["hardware"]["profile"]["env_runner"] == manifest["options"]["env_runner"] == "rllib"


def test_a_completed_run_records_full_provenance(roots, monkeypatch):
    monkeypatch.delenv("FAKE_RECIPE_ITERATIONS", raising=False)
    assert _run(roots, "--seed", "7", "--run-id", "first") == 0
    results, artifacts = roots
    manifest = run_helpers.manifest(results / "first")
    assert manifest["schema_version"] == MANIFEST_SCHEMA_VERSION
    assert (manifest["status"], manifest["run_id"], manifest["exit_code"], manifest["error"]) == (
        "completed",
        "first",
        0,
        None,
    )
    assert manifest["started_at"] <= manifest["heartbeat"]["at"] == manifest["ended_at"]
    source = pathlib.Path(manifest["experiment"]["source_file"])
    assert manifest["experiment"]["module"] == FAKE and source.name == "fake_recipe.py"
    assert re.fullmatch("[0-9a-f]{64}", manifest["experiment"]["source_sha256"])
    for repo in ("experiment_repo", "library"):
        assert {"commit", "dirty", "diff_sha256"} <= set(manifest["code"][repo])
    assert {"build_hash", "lock_sha256", "built_with_bazel"} <= set(manifest["build"])
    assert set(manifest["versions"]) == {"python", "ray", "torch", "gymnasium", "numpy"}
    assert manifest["command_line"][1:2] == [FAKE] and manifest["command_line"][-2:] == ["--run-id", "first"]
    assert manifest["seed"] == 7 and manifest["options"]["seed"] == 7
    assert manifest["options"]["hardware_profile"] == "auto"
    assert manifest["hardware"]["profile"]["requested"] == "auto"
    assert manifest["hardware"]["profile"]["env_runner"] == manifest["options"]["env_runner"] == "batched"
    assert manifest["hardware"]["machine"]["cpu_count"] >= 1
    assert "gpu_model" in manifest["hardware"]["machine"] and "cuda_version" in manifest["hardware"]["machine"]
    assert manifest["parent_run"] is None
    assert manifest["cluster"] is None  # the fake recipe starts no Ray
    assert manifest["seed_streams"]["fake/noise"]["kind"] == "generator"
    assert [c["iteration"] for c in manifest["checkpoints"]] == [2, 4, 5]
    rows = records.read_json_lines(str(artifacts / "first" / records.METRICS_FILE))
    assert [row["training_iteration"] for row in rows] == [1, 2, 3, 4, 5]
    summary = json.loads((results / "first" / records.SUMMARY_FILE).read_text())
    assert summary["rows"] == 5 and summary["metrics"]["fake/loss"]["points"] == 5
    assert summary["metrics"]["num_env_steps_sampled_lifetime"]["last"] == 500
    assert summary["outcome"] == {
        "iterations": 5,
        "env_steps": 500,
        "last_loss": rows[-1]["fake/loss"],
        "niceness": os.getpriority(os.PRIO_PROCESS, 0),
    }
    assert not any(path.name.startswith(".tmp-") for path in results.rglob("*"))


def test_the_same_seed_gives_the_same_metrics(roots):
    assert _run(roots, "--run-id", "a") == 0 and _run(roots, "--run-id", "b") == 0
    loss = lambda run_id: [r["fake/loss"] for r in run_helpers.metrics_rows(roots[1] / run_id)]
    assert loss("a") == loss("b")
    assert _run(roots, "--run-id", "c", "--seed", "1") == 0
    assert loss("c") != loss("a")


def test_smoke_runs_go_to_their_own_folder(roots):
    assert _run(roots, "--smoke", "--run-id", "quick") == 0
    results, artifacts = roots
    assert (results / "smoke" / "quick" / records.MANIFEST_FILE).exists()
    assert len(run_helpers.metrics_rows(artifacts / "smoke" / "quick")) == 2
    assert not (results / "quick").exists()


def test_under_bazel_run_records_go_beside_the_recipe_source(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(tmp_path))
    assert cli.main(["rl-harness", FAKE, "--run-id", "here"]) == 0
    package = tmp_path / "rl" / "harness" / "tests"
    assert (package / "results" / "here" / records.MANIFEST_FILE).exists()
    assert (package / "artifacts" / "here" / records.METRICS_FILE).exists()


def test_under_bazel_run_a_recipe_outside_the_binary_is_found_in_the_workspace(tmp_path, monkeypatch):
    import rl
    import rl.harness

    for package in (rl, rl.harness):  # the import path changes below are undone after the test
        monkeypatch.setattr(package, "__path__", list(package.__path__))
    monkeypatch.setattr(sys, "path", list(sys.path))
    recipe = tmp_path / "rl" / "harness" / "workspace_only" / "recipe.py"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("def run(context):\n    return {'found': 'in the workspace'}\n")
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(tmp_path))
    try:
        # tmp_path stands in for the workspace but is no git checkout: the run records the files' hashes instead
        assert (
            cli.main(["rl-harness", "rl.harness.workspace_only.recipe", "--run-id", "ws", "--allow-untracked-code"])
            == 0
        )
    finally:
        for name in ("rl.harness.workspace_only.recipe", "rl.harness.workspace_only"):
            sys.modules.pop(name, None)
    summary = json.loads((recipe.parent / "results" / "ws" / records.SUMMARY_FILE).read_text())
    assert summary["outcome"] == {"found": "in the workspace"}


def test_a_failing_recipe_is_recorded_as_failed_and_keeps_what_it_wrote(roots, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_FAIL_AT", "3")
    assert _run(roots, "--run-id", "bad") == errors.EXIT_FAILED
    manifest = run_helpers.manifest(roots[0] / "bad")
    assert manifest["status"] == "failed" and manifest["exit_code"] == 1
    assert manifest["error"] == {"type": "RuntimeError", "message": "fake failure at iteration 3"}
    assert [row["training_iteration"] for row in run_helpers.metrics_rows(roots[1] / "bad")] == [1, 2]
    assert "fake failure" in (roots[1] / "bad" / "traceback.txt").read_text()


def test_resume_from_a_run_id_continues_the_counters(roots, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    assert _run(roots, "--run-id", "parent") == 0
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "5")
    assert _run(roots, "--run-id", "child", "--resume-from", "parent") == 0
    rows = run_helpers.metrics_rows(roots[1] / "child")
    assert [(r["training_iteration"], r["num_env_steps_sampled_lifetime"]) for r in rows] == [(4, 400), (5, 500)]
    parent = run_helpers.manifest(roots[0] / "child")["parent_run"]
    assert (parent["parent_run_id"], parent["iteration"], parent["env_steps"]) == ("parent", 3, 300)
    assert parent["checkpoint"].endswith("parent/checkpoints/iter_000003")
    assert len(run_helpers.metrics_rows(roots[1] / "parent")) == 3  # the parent's records are untouched


def test_resume_from_a_smoke_run_by_id_finds_its_smoke_folders(roots, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    assert _run(roots, "--run-id", "tiny", "--smoke") == 0
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    assert _run(roots, "--run-id", "more", "--resume-from", "tiny") == 0
    parent = run_helpers.manifest(roots[0] / "more")["parent_run"]
    assert parent["checkpoint"].endswith("smoke/tiny/checkpoints/iter_000002")
    # a manifest that no longer says whether the run was a smoke run: one line naming the problem
    manifest_file = roots[0] / "smoke" / "tiny" / records.MANIFEST_FILE
    manifest = json.loads(manifest_file.read_text())
    del manifest["options"]["smoke"]
    manifest_file.write_text(json.dumps(manifest))
    assert _run(roots, "--run-id", "again", "--resume-from", "tiny") == EXIT_USAGE
    assert "records no options.smoke" in capsys.readouterr().err


def test_resume_from_a_checkpoint_folder(roots, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    assert _run(roots, "--run-id", "parent") == 0
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    checkpoint = roots[1] / "parent" / "checkpoints" / "iter_000002"
    assert _run(roots, "--run-id", "child", "--resume-from", str(checkpoint)) == 0
    assert [r["training_iteration"] for r in run_helpers.metrics_rows(roots[1] / "child")] == [3]
    assert run_helpers.manifest(roots[0] / "child")["parent_run"]["parent_run_id"] == "parent"


def _saved_by(path: pathlib.Path, experiment: str) -> None:
    """Rewrites a record as if recipe `experiment` had saved it."""
    record = json.loads(path.read_text())
    if "experiment" in record and isinstance(record["experiment"], dict):
        record["experiment"]["module"] = experiment
    else:
        record["experiment"] = experiment
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("resume_from", ["parent", "checkpoint folder"])
def test_resuming_another_experiments_checkpoint_is_refused_before_any_record(roots, monkeypatch, capsys, resume_from):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    assert _run(roots, "--run-id", "parent") == 0
    checkpoint = roots[1] / "parent" / "checkpoints" / "iter_000002"
    _saved_by(checkpoint / records.CHECKPOINT_STATE_FILE, "experiments.mess3.memoryless_agent")
    _saved_by(roots[0] / "parent" / records.MANIFEST_FILE, "experiments.mess3.memoryless_agent")
    capsys.readouterr()
    value = "parent" if resume_from == "parent" else str(checkpoint)
    assert _run(roots, "--run-id", "child", "--resume-from", value) == EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"is a checkpoint of experiments.mess3.memoryless_agent, not of {FAKE}" in error[0]
    assert not (roots[0] / "child").exists() and not (roots[1] / "child").exists()


def test_a_trials_checkpoints_are_kept_apart_and_resuming_the_run_asks_which(roots, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    monkeypatch.setenv("FAKE_RECIPE_TRIAL", "agent_a")
    assert _run(roots, "--run-id", "agents") == 0
    [entry] = run_helpers.manifest(roots[0] / "agents")["checkpoints"]
    assert (entry["path"], entry["trial_id"]) == ("checkpoints/agent_a/iter_000002", "agent_a")
    state = json.loads((roots[1] / "agents" / entry["path"] / records.CHECKPOINT_STATE_FILE).read_text())
    assert state["trial_id"] == "agent_a"

    assert _run(roots, "--run-id", "resumed", "--resume-from", "agents") == EXIT_USAGE
    error = capsys.readouterr().err
    assert "saved checkpoints for several trials (agent_a)" in error and "checkpoints/<trial>/iter_N" in error
    # The folder itself resumes.
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    assert _run(roots, "--run-id", "resumed", "--resume-from", str(roots[1] / "agents" / entry["path"])) == 0


def test_a_trial_name_must_be_a_folder_name(roots, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_TRIAL", "../escape")
    assert _run(roots, "--run-id", "bad-trial") != 0
    manifest = run_helpers.manifest(roots[0] / "bad-trial")
    assert manifest["status"] == "failed" and "must be a plain folder name" in manifest["error"]["message"]
    assert not (roots[1] / "escape").exists()


def _not_a_checkpoint(tmp_path):
    (tmp_path / "empty").mkdir()
    return str(tmp_path / "empty")


def _corrupt_checkpoint(tmp_path):
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / records.CHECKPOINT_STATE_FILE).write_text("{")
    return str(tmp_path / "corrupt")


def _a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    return str(tmp_path / "file")


def _a_closed_port(tmp_path):
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{bound.getsockname()[1]}"


@pytest.mark.parametrize(
    "args, message",
    [
        (["no.such.recipe"], "no module named 'no.such.recipe': check the dotted name"),
        (["not a module"], "is not a dotted module name"),
        (["rl.harness.tests.no_run_recipe"], "has no run(context) function; define"),
        ([FAKE, "--run-id", "../up"], "contains '/'"),
        ([FAKE, "--run-id", "smoke"], "reserved"),
        ([FAKE, "--resume-from", "20990101T000000Z-ffffff"], "neither a checkpoint folder nor a run"),
        ([FAKE, "--resume-from", _not_a_checkpoint], "is not a checkpoint"),
        ([FAKE, "--resume-from", _corrupt_checkpoint], "cannot read the checkpoint state"),
        ([FAKE, "--resume-from", _a_file], "is not a readable folder"),
        ([FAKE, "--hardware-profile", "cuda"], "use --hardware-profile auto or cpu"),
        ([FAKE, "--upload-artifacts"], "--upload-artifacts needs a store"),
        ([FAKE, "--seed", "-3"], "--seed must be a non-negative integer"),
        ([FAKE, "--ray-address", "head"], "is not an address; pass <head>:<port>"),
        ([FAKE, "--ray-address", _a_closed_port], "nothing listens on 127.0.0.1:"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line_naming_the_fix(tmp_path, capsys, args, message):
    if "cuda" in args and cli.hardware.detect_machine().cuda_available:
        pytest.skip("this machine has CUDA")
    args = [arg(tmp_path) if callable(arg) else arg for arg in args]
    argv = ["rl-harness", *args, "--results-dir", str(tmp_path / "r"), "--artifacts-dir", str(tmp_path / "a")]
    with pytest.raises(SystemExit) if "--seed" in args else _no_exit() as caught:
        status = cli.main(argv)
    status = caught.value.code if "--seed" in args else status
    error = capsys.readouterr().err.strip()
    assert status == EXIT_USAGE
    assert len(error.splitlines()) == 1 and message in error, error
    assert not (tmp_path / "r").exists()  # nothing is written for a refused run


class _no_exit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_same_or_nested_results_and_artifacts_folders_are_refused(tmp_path, capsys):
    for artifacts in (tmp_path / "r", tmp_path / "r" / "artifacts"):
        argv = ["rl-harness", FAKE, "--results-dir", str(tmp_path / "r"), "--artifacts-dir", str(artifacts)]
        assert cli.main(argv) == EXIT_USAGE
        assert "must be separate folders" in capsys.readouterr().err


def test_an_existing_run_id_is_refused(roots, capsys):
    assert _run(roots, "--run-id", "once") == 0
    assert _run(roots, "--run-id", "once") == EXIT_USAGE
    assert "already exists; choose another --run-id" in capsys.readouterr().err


def test_a_bad_heartbeat_setting_is_refused(roots, monkeypatch, capsys):
    monkeypatch.setenv("RL_HARNESS_HEARTBEAT_S", "-1")
    assert _run(roots) == EXIT_USAGE
    assert "RL_HARNESS_HEARTBEAT_S" in capsys.readouterr().err


def test_runs_show_and_diff(roots, capsys):
    assert _run(roots, "--run-id", "a") == 0 and _run(roots, "--run-id", "b", "--seed", "9") == 0
    capsys.readouterr()
    results = ["--results-dir", str(roots[0])]
    assert cli.main(["rl-harness", "runs", *results]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in listing[1:]] == [["a", "completed"], ["b", "completed"]]
    assert cli.main(["rl-harness", "show", "a", *results]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("run a: completed") and f"experiment: {FAKE}  seed 42" in shown
    assert "final metrics:" in shown.split("provenance:")[0]
    assert cli.main(["rl-harness", "show", "a", "--json", *results]) == 0
    assert json.loads(capsys.readouterr().out)["effective_status"] == "completed"
    assert cli.main(["rl-harness", "diff", "a", "b", *results]) == 0
    differences = capsys.readouterr().out
    assert "seed: 42 -> 9" in differences  # (code may differ too: others edit this checkout meanwhile)
    assert "options (1), seed (1)" in differences and "final metrics (a -> b):" in differences
    assert all(section in differences.split("same: ")[1] for section in ("lock", "build", "hardware", "versions"))
    assert cli.main(["rl-harness", "show", "nope", *results]) == EXIT_USAGE
    assert "no run 'nope'" in capsys.readouterr().err


def test_an_experiments_runs_command_lists_only_that_experiments_runs(roots, tmp_path, monkeypatch, capsys):
    (tmp_path / "other_recipe.py").write_text("from rl.harness.tests.fake_recipe import HYPERPARAMETERS, run\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    folders = ["--results-dir", str(roots[0]), "--artifacts-dir", str(roots[1])]
    assert cli.main(["rl-harness", FAKE, "--run-id", "mine", *folders]) == 0
    assert cli.main(["rl-harness", "other_recipe", "--run-id", "theirs", "--allow-untracked-code", *folders]) == 0
    monkeypatch.setenv("FAKE_RECIPE_FAIL_AT", "1")
    assert cli.main(["rl-harness", FAKE, "--run-id", "broken", *folders]) == 1
    capsys.readouterr()
    assert cli.main(["fake", "runs", "--results-dir", str(roots[0])], recipe=FAKE) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["mine", "broken"]
    assert cli.main(["rl-harness", "runs", "--results-dir", str(roots[0]), "--recipe", "other_recipe"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["theirs"]
    # the same filter spelled --experiment
    assert cli.main(["rl-harness", "runs", "--results-dir", str(roots[0]), "--experiment", "other_recipe"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["theirs"]
    assert cli.main(["rl-harness", "runs", "--results-dir", str(roots[0]), "--last", "1", "--status", "completed"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["theirs"]
    with pytest.raises(SystemExit, match=str(EXIT_USAGE)):
        cli.main(["rl-harness", "runs", "--status", "finished"])
    assert "invalid choice: 'finished'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, experiment", [(["rl-harness", FAKE, "--seed", "3", "--help"], None), (["fake", "--help"], FAKE)]
)
def test_a_recipes_help_lists_its_set_keys_with_types_defaults_and_ranges(argv, experiment, capsys):
    with pytest.raises(SystemExit, match="0"):
        cli.parse(argv, experiment)
    listed = capsys.readouterr().out.split(f"--set keys of {FAKE} (KEY=VALUE; type, default, range):\n")[1]
    assert listed.split("\n") == [
        "  fake/iterations  int, default 0, >= 0",
        "  fake/loss_scale  float, default 1.0, any number",
        "",
    ]


def test_runs_searches_the_workspace_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(tmp_path))
    assert cli.main(["rl-harness", FAKE, "--run-id", "found"]) == 0
    capsys.readouterr()
    assert cli.main(["rl-harness", "runs"]) == 0
    assert "found" in capsys.readouterr().out


def _experiment_binary():
    """The rl_experiment test binary in this test's runfiles (only under `bazel test`)."""
    path = pathlib.Path("rl/harness/fake_experiment")
    return path.resolve() if "TEST_SRCDIR" in os.environ and path.exists() else None


@pytest.mark.skipif(_experiment_binary() is None, reason="needs bazel test (the rl_experiment binary)")
def test_an_rl_experiment_binary_records_its_build_hash(tmp_path):
    command = [
        str(_experiment_binary()),
        "--smoke",
        "--run-id",
        "built",
        "--results-dir",
        str(tmp_path / "r"),
        "--artifacts-dir",
        str(tmp_path / "a"),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    manifest = run_helpers.manifest(tmp_path / "r" / "smoke" / "built")
    assert manifest["build"]["built_with_bazel"] is True
    assert re.fullmatch("[0-9a-f]{64}", manifest["build"]["build_hash"])
    assert manifest["build"]["target"] == "//rl/harness:fake_experiment"
    assert re.fullmatch("[0-9a-f]{64}", manifest["build"]["lock_sha256"])
    listing = subprocess.run(
        [str(_experiment_binary()), "runs", "--results-dir", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "built" in listing.stdout and "completed" in listing.stdout


@pytest.mark.parametrize(
    "code",
    [
        # The face: the devops venv, which has none of these, imports it.
        "import rl.harness",
        # `rl-harness runs`: the catalog reads JSON records; Ray, torch and pandas are seconds of start-up.
        "from rl.harness.commands import cli; cli.main(['rl-harness', 'runs', '--results-dir', sys.argv[1]])",
    ],
)
def test_the_face_and_the_runs_command_load_no_heavy_library(code, tmp_path):
    heavy = {"import rl.harness": ["numpy", "scipy", "ray", "torch", "pandas"]}.get(code, ["ray", "torch", "pandas"])
    check = f"import sys; {code}; sys.exit(','.join(m for m in {heavy!r} if m in sys.modules) or None)"
    finished = subprocess.run(
        [sys.executable, "-c", check, str(tmp_path)],
        env=run_helpers.child_env(),
        timeout=120,
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr


def test_the_cli_and_the_address_check_import_no_ray():
    code = "import sys, rl.harness.commands.cli, rl.harness.training.cluster; sys.exit('ray' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], env=run_helpers.child_env(), timeout=60, check=False).returncode
        == 0
    )


@pytest.mark.parametrize("flag", ["--results-dir", "--artifacts-dir"])
def test_a_records_folder_that_is_a_file_is_refused_with_one_line(tmp_path, capsys, flag):
    (tmp_path / "file").write_text("kept")
    folders = {
        "--results-dir": str(tmp_path / "r"),
        "--artifacts-dir": str(tmp_path / "a"),
        flag: str(tmp_path / "file" / "below"),
    }
    argv = ["rl-harness", FAKE, *(part for pair in folders.items() for part in pair)]
    assert cli.main(argv) == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"lies under {tmp_path / 'file'}, which is a file" in error, error
    assert (tmp_path / "file").read_text() == "kept" and not (tmp_path / "r").exists()
    assert cli.main(["rl-harness", "runs", "--results-dir", str(tmp_path / "file")]) == EXIT_USAGE
    assert "is a file, not a folder" in capsys.readouterr().err


def test_relative_records_folders_mean_where_the_user_typed_the_command(tmp_path, monkeypatch, capsys):
    typed_in, runfiles = tmp_path / "typed_in", tmp_path / "runfiles"
    typed_in.mkdir(), runfiles.mkdir()
    monkeypatch.chdir(runfiles)  # where `bazel run` starts a binary
    monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(typed_in))
    assert cli.main(["rl-harness", FAKE, "--run-id", "here", "--results-dir", "r", "--artifacts-dir", "a"]) == 0
    assert (typed_in / "r" / "here" / "run_manifest.json").is_file() and not list(runfiles.iterdir())
    capsys.readouterr()
    assert cli.main(["rl-harness", "runs", "--results-dir", "r"]) == 0
    assert "here" in capsys.readouterr().out


def test_a_truncated_manifest_is_listed_as_damaged_and_the_other_runs_still_show(roots, capsys):
    assert _run(roots, "--run-id", "healthy") == 0 and _run(roots, "--run-id", "torn") == 0
    torn = roots[0] / "torn" / "run_manifest.json"
    torn.write_text(torn.read_text()[:200])
    capsys.readouterr()
    results = ["--results-dir", str(roots[0])]
    assert cli.main(["rl-harness", "runs", *results]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in listing[1:3]] == [["healthy", "completed"], ["torn", "damaged"]]
    assert listing[3].startswith(f"damaged torn: cannot read the run manifest at {torn}")
    assert "restore it from git or B2" in listing[3]
    assert cli.main(["rl-harness", "show", "healthy", *results]) == 0
    capsys.readouterr()
    assert cli.main(["rl-harness", "show", "torn", *results]) == EXIT_USAGE
    error = capsys.readouterr().err.strip()
    assert (
        len(error.splitlines()) == 1 and "run torn is damaged" in error and re.search(r"line \d+ column \d+", error)
    ), error


@pytest.mark.parametrize("experiment", [None, FAKE])
def test_help_lists_every_subcommand(capsys, experiment):
    with pytest.raises(SystemExit) as done:
        cli.parse(["prog", "--help"], experiment)
    printed = capsys.readouterr().out
    assert done.value.code == 0
    assert all(f"\n  {command} " in printed for command in arguments.COMMANDS), printed


def test_the_recipes_binary_and_the_generic_one_find_the_same_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(tmp_path))
    custom = ["--results-dir", str(tmp_path / "custom" / "res"), "--artifacts-dir", str(tmp_path / "custom" / "art")]
    assert cli.main(["rl-harness", FAKE, "--run-id", "elsewhere", *custom]) == 0
    assert cli.main(["rl-harness", FAKE, "--run-id", "other", "--seed", "3", *custom]) == 0
    for argv, recipe in ((["rl-harness"], None), (["fake"], FAKE)):
        capsys.readouterr()
        assert cli.main([*argv, "show", "elsewhere"], recipe=recipe) == 0
        assert capsys.readouterr().out.startswith("run elsewhere: completed")
        assert cli.main([*argv, "diff", "elsewhere", "other"], recipe=recipe) == 0
        assert "seed: 42 -> 3" in capsys.readouterr().out
        assert cli.main([*argv, "runs"], recipe=recipe) == 0
        assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["elsewhere", "other"]


def test_runs_sorts_and_keeps_smoke_or_full_runs(roots, monkeypatch, capsys):
    folders = ["--results-dir", str(roots[0]), "--artifacts-dir", str(roots[1])]
    assert cli.main(["rl-harness", FAKE, "--run-id", "full-b", *folders]) == 0
    assert cli.main(["rl-harness", FAKE, "--run-id", "smoke-a", "--smoke", *folders]) == 0
    monkeypatch.setenv("FAKE_RECIPE_FAIL_AT", "1")
    assert cli.main(["rl-harness", FAKE, "--run-id", "full-a", *folders]) == 1

    def listed(*args):
        capsys.readouterr()
        assert cli.main(["rl-harness", "runs", "--results-dir", str(roots[0]), *args]) == 0
        return [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]

    assert listed() == ["full-b", "smoke-a", "full-a"]  # oldest start first
    assert listed("--sort", "id") == ["full-a", "full-b", "smoke-a"]
    assert listed("--sort", "status") == ["full-b", "smoke-a", "full-a"]  # completed < failed
    assert listed("--smoke") == ["smoke-a"]
    assert listed("--full", "--sort", "id") == ["full-a", "full-b"]
    assert listed("--full", "--last", "1") == ["full-a"]
    with pytest.raises(SystemExit, match=str(EXIT_USAGE)):
        cli.parse(["rl-harness", "runs", "--smoke", "--full"])
