"""Slow: `rl-harness reproduce` end to end on a tiny recipe committed to a temporary git repository.

Bazel cannot run inside this test's sandbox, so `tests/fake_bazel.py` ($RL_HARNESS_BAZEL) stands
in for it: it hashes the checkout's sources with the real tools/build_info/compute.py and runs
the recipe through the harness CLI in a subprocess. Everything else is the real command:
scratch worktree at the recorded commit, saved patch, build comparison, run, row comparison.

The tiny recipe wraps tests/fake_recipe.py (no RLlib; seeded noise) and declares itself
deterministic, so a faithful reproduction is "identical". A second one wraps
tests/kernel_dispatch_recipe.py, whose sums follow torch's CPU capability: one machine stands in
for two numeric platforms by pinning `ATEN_CPU_CAPABILITY=default` for one run and not the other.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys

import pytest

from rl.harness.commands import cli
from rl.harness.run import records
from rl.harness.tests import fake_bazel, run_helpers, s3_server

TARGET = "//tiny:recipe"
RECIPE = '''"""A tiny deterministic recipe: fake_recipe's loop, one process, noise from the seed streams."""
from rl.harness.run.manifest import OwnLoopRunnerRecord
from rl.harness.tests import fake_recipe

STEPS_PER_ITERATION = 100


def run(context):
    context.recorder.record_runner(OwnLoopRunnerRecord(kind="own loop", details={"determinism": {
        "expected": True, "why": "one process; noise from the seed streams"}}))
    fake_recipe.STEPS_PER_ITERATION = STEPS_PER_ITERATION
    return fake_recipe.run(context)
'''
KERNELS_TARGET = "//tiny:kernels"
KERNELS_RECIPE = "from rl.harness.tests.kernel_dispatch_recipe import HYPERPARAMETERS, run  # noqa: F401\n"


def _git(folder, *args):
    return subprocess.run(
        ["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A checkout holding the tiny recipe; its runs' results and artifacts go inside it, untracked."""
    folder = tmp_path / "repo"
    (folder / "tiny").mkdir(parents=True)
    (folder / "tiny" / "__init__.py").write_text("")
    (folder / "tiny" / "recipe.py").write_text(RECIPE)
    (folder / "tiny" / "kernels.py").write_text(KERNELS_RECIPE)
    (folder / "requirements_lock.txt").write_text("numpy==2.0.0\n")
    (folder / ".gitignore").write_text("bazel-*\n__pycache__/\n")  # as a real checkout ignores them
    _git(folder, "init", "-q")
    _git(folder, "add", ".")
    _git(folder, "commit", "-q", "-m", "tiny recipe")
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(folder))
    monkeypatch.setenv("RL_HARNESS_BAZEL", f"{sys.executable} {os.path.abspath(fake_bazel.__file__)}")
    monkeypatch.setenv("RL_HARNESS_REPRODUCE_DIR", str(tmp_path / "scratch"))
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)  # this machine's own level, unless a test pins one
    return folder


def _results(repo):
    return repo / "tiny" / "results"


def _run(repo, run_id, target=TARGET, *flags, environment=None):
    """The original run, as `bazel run //tiny:recipe -- ...` would start it (in `environment`: default this one's)."""
    done = subprocess.run(
        [
            *os.environ["RL_HARNESS_BAZEL"].split(),
            "run",
            target,
            "--",
            "--seed",
            "7",
            "--run-id",
            run_id,
            "--results-dir",
            str(_results(repo)),
            "--artifacts-dir",
            str(repo / "tiny" / "artifacts"),
            *flags,
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return _record(_results(repo) / run_id)


def _reproduce(repo, capsys, run_id, *flags):
    """(exit status, printed verdict, the reproduction's manifest)."""
    status = cli.main(["rl-harness", "reproduce", run_id, "--results-dir", str(_results(repo)), *flags])
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    starts = [
        next((number for number, line in enumerate(lines) if line.startswith(word)), None)
        for word in ("platform", "reproduction ")
    ]
    assert None not in starts and starts[0] < starts[1], printed  # the platform comparison before the run
    verdict = lines[starts[1]]
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
    assert (verdict["parent_run"], verdict["build_hash_match"], verdict["rows_compared"]) == (
        original["run_id"],
        True,
        4,
    )
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
    edited = {
        **original,
        "build": {**build, "build_hash": "0" * 64, "sources": {**build["sources"], "tiny/recipe.py": "f" * 64}},
    }
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
    assert status == 0 and "patch: recreates the recorded change" in printed and "verdict: identical" in printed, (
        printed
    )
    assert reproduction["reproduction"]["patch_verified"] is True
    assert reproduction["build"]["build_hash"] == original["build"]["build_hash"]
    assert [row["num_env_steps_sampled_lifetime"] for row in _rows(reproduction)] == [50, 100, 150, 200]


# -- one machine as two numeric platforms: ATEN_CPU_CAPABILITY=default against this machine's level ------


def _at_default_level():
    return {**os.environ, "ATEN_CPU_CAPABILITY": "default"}


def _platform_line(printed):
    """The line after "reproducing run <id>: commit ..., target ...", printed before anything is built."""
    first, second = printed.splitlines()[:2]
    assert first.startswith("reproducing run ") and ", target //tiny:" in first, printed
    return second


def test_a_run_at_another_capability_level_reproduces_consistently_naming_the_platform_and_first_divergence(
    repo, capsys
):
    original = _run(repo, "20261202T000000Z-level1", KERNELS_TARGET, environment=_at_default_level())
    assert original["platform"]["torch_cpu_capability"] == "DEFAULT"

    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    line = _platform_line(printed)
    assert line.startswith("platform differs from the original's: ") and line.count("\n") == 0, printed
    assert (
        "kernel_dispatch.ATEN_CPU_CAPABILITY: 'default' -> None" in line
        and "torch_cpu_capability: 'DEFAULT' -> '" in line
    )
    assert "first divergence: row 1 (iteration 1), kernels/value: " in printed, printed
    assert "score score: " in printed and "within (the run's interval" in printed, printed
    assert "verdict: consistent (platform differs)" in printed and status == 0, printed
    print(printed, file=sys.stderr)  # the report, for the test log
    verdict = reproduction["reproduction"]
    assert verdict["verdict"] == "consistent (platform differs)" and verdict["expected"] == "statistical"
    assert "torch_cpu_capability" in verdict["platform_differences"]
    assert verdict["first_divergence"]["key"] == "kernels/value"
    assert {entry["quantity"]: entry["within"] for entry in verdict["judgement"]["quantities"]} == {
        "metric kernels/value": True,
        "metric num_env_steps_sampled_lifetime": True,
        "score score": True,
    }


def test_a_score_that_moves_beyond_its_interval_on_another_level_diverged(repo, capsys):
    original = _run(
        repo,
        "20261202T000000Z-chaos1",
        KERNELS_TARGET,
        "--set",
        "kernels/chaotic_score=true",
        environment=_at_default_level(),
    )
    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    assert _platform_line(printed).startswith("platform differs from the original's: "), printed
    assert "score score: " in printed and "OUTSIDE (the run's interval" in printed, printed
    assert "verdict: diverged" in printed and status == 1, printed
    assert reproduction["options"]["set"] == {"kernels/chaotic_score": True}  # the recorded override, reapplied


def test_on_the_same_platform_rows_must_still_be_identical(repo, capsys, monkeypatch):
    """At one pinned level, the run repeats itself; one bit changed in a recorded row is a divergence,
    however consistent the outcome would be judged across platforms."""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    original = _run(repo, "20261202T000000Z-same01", KERNELS_TARGET)
    status, printed, _ = _reproduce(repo, capsys, original["run_id"])
    assert _platform_line(printed) == "platform: the same numeric platform as the original's", printed
    assert "identical expected" in printed and "verdict: identical" in printed and status == 0, printed

    metrics = os.path.join(original["paths"]["artifacts"], records.METRICS_FILE)
    rows = records.read_json_lines(metrics)
    rows[2]["kernels/value"] = math.nextafter(rows[2]["kernels/value"], math.inf)  # the last bit of one value
    with open(metrics, "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    status, printed, _reproduction = _reproduce(repo, capsys, original["run_id"])
    assert "first divergence: row 3 (iteration 3), kernels/value" in printed and "statistical verdict" not in printed
    assert "verdict: diverged" in printed and status == 1, printed


def test_the_portable_profile_is_recorded_applied_by_reproduce_and_repeats_itself(repo, capsys):
    original = _run(repo, "20261202T000000Z-port01", KERNELS_TARGET, "--hardware-profile", "cpu-portable")
    assert original["hardware"]["profile"]["name"] == "cpu-portable"
    recorded = original["platform"]
    assert recorded["torch_cpu_capability"] == "DEFAULT" and recorded["numpy_simd"] == []
    assert recorded["kernel_dispatch"]["MKL_CBWR"] == "COMPATIBLE"
    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    assert _platform_line(printed) == "platform: the same numeric platform as the original's", printed
    assert "verdict: identical" in printed and status == 0, printed
    assert reproduction["hardware"]["profile"]["name"] == "cpu-portable"
    assert reproduction["platform"] == recorded


def test_ctrl_c_during_the_reproduction_stops_it_cleanly_in_one_line(repo, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "400")
    monkeypatch.setenv("FAKE_RECIPE_SLEEP_S", "0.05")
    _run(repo, "long", TARGET, "--stop-at-iteration", "2")
    before = {path.name for path in _results(repo).iterdir()}

    def reproduction_running():
        started = [path for path in _results(repo).iterdir() if path.name not in before]
        return (
            started
            and (started[0] / records.MANIFEST_FILE).is_file()
            and run_helpers.metrics_rows(repo / "tiny" / "artifacts" / started[0].name)
            and started[0]
        )

    process = run_helpers.start_cli(["reproduce", "long", "--results-dir", _results(repo)])
    try:
        started = run_helpers.wait_for(reproduction_running, 120, "the reproduction's first metrics row")
        process.send_signal(signal.SIGINT)  # to the reproduce command only, as a terminal's Ctrl-C reaches it
        _, stderr = process.communicate(timeout=120)
    finally:
        run_helpers.stop_group(process)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        f"rl-harness: error: reproduction {started.name} of run long stopped by SIGINT (exit 130, the run interrupted);"
        " nothing was compared: reproduce again to compare"
    )
    reproduction = _record(started)
    assert reproduction["status"] == "interrupted" and reproduction["checkpoints"]  # it stopped at a checkpoint


# -- a shared run: its CPU share, its metrics in a store, or only its committed summary ----------


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a share below the machine needs 2 CPUs")
def test_a_run_under_a_cpu_share_is_reproduced_under_it_saying_so_first(repo, capsys, monkeypatch):
    original = _run(repo, "20261202T000000Z-share1", environment={**os.environ, "RL_HARNESS_CPUS": "1"})
    assert original["hardware"]["machine"]["cpu_limit"].startswith("$RL_HARNESS_CPUS=1 (of ")
    monkeypatch.delenv("RL_HARNESS_CPUS", raising=False)  # the reproducing shell sets none
    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    second = printed.splitlines()[1]
    assert second.startswith("applying the run's recorded CPU limit: $RL_HARNESS_CPUS=1 ($RL_HARNESS_CPUS=1 (of "), (
        printed
    )
    assert "verdict: identical" in printed and status == 0, printed
    assert reproduction["hardware"]["machine"]["cpu_limit"].startswith("$RL_HARNESS_CPUS=1 (of ")
    placement = ("max_env_runners", "num_cpus", "torch_threads")
    assert (
        [reproduction["hardware"]["profile"][field] for field in placement]
        == [original["hardware"]["profile"][field] for field in placement]
        == [0, 1, 1]
    )


def test_metrics_in_the_store_are_fetched_and_compared_row_by_row(repo, capsys, monkeypatch):
    with s3_server.S3Server() as server:
        store = {
            **server.store_env(),
        }
        original = _run(
            repo, "20261202T000000Z-store1", TARGET, "--upload-artifacts", environment={**os.environ, **store}
        )
        shutil.rmtree(original["paths"]["artifacts"])  # a clone of the shared run: its committed records only
        for name, value in store.items():
            monkeypatch.setenv(name, value)
        status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    fetched = [line for line in printed.splitlines() if line.startswith("metrics of run ")]
    assert fetched == [
        (
            f"metrics of run {original['run_id']} are not on this machine: fetched from"
            f" s3://{server.bucket}/lab into {original['paths']['artifacts']}/metrics.jsonl,"
            " verified by sha256"
        )
    ], printed
    assert "rows compared: 4" in printed and "verdict: identical" in printed and status == 0, printed
    assert reproduction["reproduction"]["evidence"] == f"its metrics.jsonl from s3://{server.bucket}/lab"


def test_on_another_platform_a_run_whose_metrics_are_nowhere_is_judged_from_its_summary(repo, capsys):
    original = _run(repo, "20261202T000000Z-summ01", KERNELS_TARGET, environment=_at_default_level())
    os.remove(os.path.join(original["paths"]["artifacts"], records.METRICS_FILE))
    status, printed, reproduction = _reproduce(repo, capsys, original["run_id"])
    assert _platform_line(printed).startswith("platform differs from the original's: "), printed
    evidence = "its committed summary.json (final metrics and scores): its metrics.jsonl is nowhere"
    assert f"evidence: {evidence} (neither here nor in a store)" in printed, printed
    assert f"the original's evidence: {evidence}" in printed and "rows compared: 0" in printed, printed
    assert "score score: " in printed and "within (the run's interval" in printed, printed
    assert "verdict: consistent (platform differs)" in printed and status == 0, printed
    verdict = reproduction["reproduction"]
    assert (verdict["evidence"], verdict["first_divergence"]) == (evidence, None)

    same = _run(repo, "20261202T000000Z-summ02", KERNELS_TARGET)  # this machine's platform: rows are needed
    os.remove(os.path.join(same["paths"]["artifacts"], records.METRICS_FILE))
    assert cli.main(["rl-harness", "reproduce", same["run_id"], "--results-dir", str(_results(repo))]) == 2
    assert "metrics of run 20261202T000000Z-summ02 are neither on this machine" in capsys.readouterr().err
