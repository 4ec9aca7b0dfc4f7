"""Fast tests of `rl-harness reproduce`: patch capture, row and build comparison, bad input (no Ray)."""

import dataclasses

import pytest

from rl.harness import env_vars
from rl.harness.commands import checkout, cli, reproduce, reproduce_inputs
from rl.harness.run import begin, provenance, records
from rl.harness.run.manifest import MANIFEST_SCHEMA_VERSION, RunManifest, read_manifest
from rl.harness.run.rows import RowBudget
from rl.harness.tests import contexts, run_helpers
from rl.harness.training import hardware

MACHINE = contexts.machine_facts(2)


@pytest.fixture
def repo(tmp_path):
    return run_helpers.committed_repo(tmp_path / "repo", {"recipe.py": "LR = 0.1\n", ".gitignore": "ignored/\n"})


def _dirty(repo):
    (repo / "recipe.py").write_text("LR = 0.2\n")
    (repo / "helper.py").write_text("HELPER = 1\n")
    (repo / "ignored").mkdir()
    (repo / "ignored" / "big.bin").write_bytes(b"x" * 10_000)


def _worktree(repo, tmp_path):
    worktree = tmp_path / "worktree"
    checkout.check_out(str(repo), run_helpers.git(repo, "rev-parse", "HEAD").strip(), "run run-1", str(worktree))
    return worktree


def test_patch_recreates_the_hashed_change(repo, tmp_path):
    _dirty(repo)
    recorded = provenance.git_state(str(repo))
    change = provenance.uncommitted_change(str(repo))
    assert change.omitted == []
    patch = tmp_path / "uncommitted.patch"
    patch.write_bytes(change.patch)
    worktree = _worktree(repo, tmp_path)
    reproduce.apply_patch(str(worktree), str(patch), "run-1", "HEAD")
    assert (worktree / "recipe.py").read_text() == "LR = 0.2\n"
    assert (worktree / "helper.py").read_text() == "HELPER = 1\n"
    assert not (worktree / "ignored").exists()  # ignored files are neither hashed nor saved
    assert provenance.git_state(str(worktree))["diff_sha256"] == recorded["diff_sha256"]


def test_a_dangling_untracked_symlink_goes_into_the_patch_as_a_link(repo, tmp_path):
    (repo / "stale_link").symlink_to(repo / "no-such-target")  # as a removed Bazel target's runfiles link
    change = provenance.uncommitted_change(str(repo))
    assert change.omitted == [] and b"stale_link" in change.patch and b"new file mode 120000" in change.patch


def test_a_module_reached_through_bazel_runfiles_is_recorded_at_its_checkout(repo, tmp_path):
    # An execroot: a `.git` link to the checkout and a real runfiles folder holding a link to the file.
    execroot = tmp_path / "execroot"
    runfiles = execroot / "bazel-out" / "bin" / "study.runfiles"
    runfiles.mkdir(parents=True)
    (execroot / ".git").symlink_to(repo / ".git")
    (runfiles / "recipe.py").symlink_to(repo / "recipe.py")
    assert provenance.git_state(str(runfiles / "recipe.py"))["dirty"]  # what git says of the execroot
    code = begin.code_state(str(runfiles / "recipe.py"), build={})
    assert code["experiment_repo"] == {
        "root": str(repo),
        "commit": run_helpers.git(repo, "rev-parse", "HEAD").strip(),
        "dirty": False,
        "diff_sha256": None,
    }


def test_untracked_files_over_the_cap_are_left_out_and_named(repo, caplog):
    _dirty(repo)
    (repo / "large.txt").write_text("y" * 5000)
    code = {"experiment_repo": provenance.git_state(str(repo)), "library": provenance.git_state(str(repo))}
    patches = begin.capture_patches(code, cap_bytes=1000)
    assert list(patches) == ["uncommitted.patch"]  # one checkout, one patch
    assert b"helper.py" in patches["uncommitted.patch"] and b"large.txt" not in patches["uncommitted.patch"]
    assert code["experiment_repo"]["patch"]["omitted"] == ["large.txt"] == code["library"]["patch"]["omitted"]
    assert "leaves out 1 untracked file(s)" in caplog.text and "large.txt" in caplog.text


def test_bad_patch_cap_is_a_usage_error():
    with pytest.raises(env_vars.EnvVarError, match="RL_HARNESS_PATCH_CAP_BYTES='lots' is not a whole number"):
        env_vars.patch_cap_bytes({env_vars.PATCH_CAP_ENV: "lots"})


ROWS = [
    {
        "training_iteration": 1,
        "loss": 0.5,
        "time_this_iter_s": 1.0,
        "timers/sample": 0.3,
        "harness/logged_at": "t1",
        "env_runners/episode_duration_sec_mean": 0.5,
        "learners/x/num_env_steps_trained_throughput": 9.0,
        "pid": 11,
    },
    {"training_iteration": 2, "loss": 0.25, "time_this_iter_s": 1.1, "pid": 11},
]


def test_identical_rows_ignore_timing_throughput_and_process_keys():
    other = [{**row, "time_this_iter_s": 7.0, "pid": 99, "harness/logged_at": "t9", "node_id": "b7"} for row in ROWS]
    other[0]["learners/x/num_env_steps_trained_throughput"] = 1.0
    other[0]["env_runners/episode_duration_sec_mean"] = 0.4
    assert reproduce.compare_rows(ROWS, other) == {"rows_compared": 2, "first_divergence": None}


def test_first_divergence_names_row_iteration_key_and_both_values():
    other = [dict(ROWS[0]), {**ROWS[1], "loss": 0.2500001}]
    assert reproduce.compare_rows(ROWS, other)["first_divergence"] == {
        "row": 2,
        "iteration": 2,
        "key": "loss",
        "original": 0.25,
        "reproduction": 0.2500001,
    }
    assert reproduce.compare_rows(ROWS, other, tolerance=0.05)["first_divergence"] is None


def test_a_shorter_reproduction_diverges_in_row_count_and_a_prefix_compares_the_first_rows():
    assert reproduce.compare_rows(ROWS, ROWS[:1])["first_divergence"]["key"] == "(row count)"
    prefix = RowBudget.of(iterations=1, env_steps=None)
    assert reproduce.compare_rows(prefix.take(ROWS), prefix.take(ROWS[:1] + [{}])) == {
        "rows_compared": 1,
        "first_divergence": None,
    }


BUILD = {
    "build_hash": "h1",
    "lock_sha256": "lock1",
    "bazel_version": "4.2.3",
    "interpreter": {"version": "3.11.7", "executable_sha256": "e1", "libpython_sha256": "l1"},
    "sources_sha256": "s1",
    "sources": {"rl/harness/commands/cli.py": "c1", "experiments/x/recipe.py": "r1"},
}


def test_same_build_inputs_have_no_differences():
    assert reproduce.build_differences(BUILD, BUILD) == []


@pytest.mark.parametrize(
    "change, named",
    [
        ({"lock_sha256": "lock2"}, "lock: requirements_lock.txt sha256 lock1 -> lock2"),
        (
            {"interpreter": {**BUILD["interpreter"], "executable_sha256": "e2"}},
            "interpreter: executable_sha256 e1 -> e2",
        ),
        ({"bazel_version": "7.7.1"}, "Bazel version: 4.2.3 -> 7.7.1"),
        (
            {"sources": {**BUILD["sources"], "experiments/x/recipe.py": "r2"}},
            "source file experiments/x/recipe.py: content differs",
        ),
        (
            {"sources": {"rl/harness/commands/cli.py": "c1"}},
            "source file experiments/x/recipe.py: not in the rebuilt binary",
        ),
    ],
)
def test_a_build_mismatch_names_the_differing_input(change, named):
    assert reproduce.build_differences(BUILD, {**BUILD, **change}) == [named]


# -- bad input: one line each, exit 2 -------------------------------------------------------


def test_unknown_run_is_one_line_exit_2(tmp_path, capsys):
    assert cli.main(["rl-harness", "reproduce", "20990101T000000Z-000000", "--results-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "no run '20990101T000000Z-000000'" in error


def test_missing_commit_names_it_and_the_fix(repo, tmp_path):
    with pytest.raises(checkout.CheckoutError, match=r"commit 0{40} of run run-1 is not in .*git fetch origin"):
        checkout.check_out(str(repo), "0" * 40, "run run-1", str(tmp_path / "worktree"))


def test_a_patch_that_no_longer_applies_says_so(repo, tmp_path):
    _dirty(repo)
    patch = tmp_path / "uncommitted.patch"
    patch.write_bytes(provenance.uncommitted_change(str(repo)).patch)
    worktree = _worktree(repo, tmp_path)
    (worktree / "recipe.py").write_text("LR = 0.3\n")
    with pytest.raises(reproduce.ReproduceError, match="saved patch of run run-1 .* no longer applies .*recipe.py"):
        reproduce.apply_patch(str(worktree), str(patch), "run-1", "0123456789abcdef")


def test_a_run_of_another_machine_kind_is_refused():
    profile = hardware.choose_profile("cpu", MACHINE).as_dict()

    def manifest(recorded_profile):
        return RunManifest.from_dict(
            {"schema_version": MANIFEST_SCHEMA_VERSION, "run_id": "run-1", "hardware": {"profile": recorded_profile}}
        )

    with pytest.raises(
        reproduce.ReproduceError, match="another machine kind: profile max_env_runners 15 there, 1 here"
    ):
        reproduce.check_machine(manifest({**profile, "num_cpus": 16, "max_env_runners": 15}), MACHINE)
    with pytest.raises(reproduce.ReproduceError, match="hardware profile 'cuda', which this machine cannot give"):
        reproduce.check_machine(manifest({**profile, "name": "cuda"}), MACHINE)
    reproduce.check_machine(manifest(profile), MACHINE)


def test_a_run_recorded_under_a_cpu_share_is_checked_under_that_share_whatever_this_shell_sets(monkeypatch):
    """A study member that ran under $RL_HARNESS_CPUS=1 on a 2-core machine: its profile is another machine kind
    for 2 cores, and the same one once the recorded share is applied (this machine, capped at 1 CPU)."""
    under_share = dataclasses.replace(MACHINE, cpu_count=1, cpu_limit="$RL_HARNESS_CPUS=1 (of sched_getaffinity 2)")
    recorded = RunManifest.from_dict(
        {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "run_id": "member-1",
            "hardware": {
                "profile": hardware.choose_profile("cpu", under_share).as_dict(),
                "machine": under_share.as_dict(),
            },
        }
    )
    with pytest.raises(reproduce.ReproduceError, match="another machine kind: profile max_env_runners 0 there, 1 here"):
        reproduce.check_machine(recorded, MACHINE)

    monkeypatch.setenv(env_vars.CPU_SHARE_ENV, "2")  # the recorded share wins over this shell's
    share = reproduce_inputs.recorded_cpu_share(recorded)
    environment = checkout.child_environment(share)
    assert (share, environment[env_vars.CPU_SHARE_ENV]) == (1, "1")
    reproduce.check_machine(recorded, hardware.detect_machine(environment))

    whole = RunManifest.from_dict(
        {"schema_version": MANIFEST_SCHEMA_VERSION, "run_id": "run-2", "hardware": {"machine": MACHINE.as_dict()}}
    )
    assert reproduce_inputs.recorded_cpu_share(whole) is None


def test_determinism_is_expected_only_for_one_local_cpu_process():
    profile = hardware.choose_profile("cpu", MACHINE)
    local = hardware.place_envs(profile, 8)
    assert hardware.determinism(profile, local, "direct")["expected"] is True
    remote = dataclasses.replace(local, num_env_runners=2, placement="remote")
    assert "2 remote env runner(s)" in hardware.determinism(profile, remote, "direct")["why"]
    assert hardware.determinism(profile, local, "tune")["expected"] is False
    two_threads = dataclasses.replace(profile, torch_threads=2)
    assert hardware.determinism(two_threads, local, "direct") == {
        "expected": False,
        "why": "2 torch threads: bit-identity is only established for one (docs/harness.md)",
    }


# -- results and artifacts are outputs: never in the hash or the patch ------------------------


def _outputs(repo):
    """Untracked run outputs as a checkout holds them before they are committed (over the patch cap)."""
    for folder in ("experiments/x/results/run-1", "experiments/x/artifacts/run-1", "results/smoke/run-2"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "metrics.jsonl").write_bytes(b"{}\n" * (1 << 20))


def test_outputs_alone_leave_the_checkout_clean(repo):
    _outputs(repo)
    assert provenance.git_state(str(repo))["dirty"] is False


def test_outputs_stay_out_of_the_hash_and_the_patch(repo, tmp_path):
    _dirty(repo)
    recorded = provenance.git_state(str(repo))
    _outputs(repo)
    assert provenance.git_state(str(repo))["diff_sha256"] == recorded["diff_sha256"]
    change = provenance.uncommitted_change(str(repo))
    assert change.omitted == [] and b"metrics.jsonl" not in change.patch and len(change.patch) < 1000
    patch = tmp_path / "uncommitted.patch"
    patch.write_bytes(change.patch)
    worktree = _worktree(repo, tmp_path)
    reproduce.apply_patch(str(worktree), str(patch), "run-1", "HEAD")
    assert provenance.git_state(str(worktree))["diff_sha256"] == recorded["diff_sha256"]


# -- the budget cap that stops a reproduction at the compared prefix --------------------------


@pytest.mark.parametrize(
    "flags, iterations, cap",
    [
        (["--stop-at-iteration", "2"], [1, 2], {"key": "training_iteration", "bound": 2}),
        (["--stop-at-env-steps", "250"], [1, 2, 3], {"key": "num_env_steps_sampled_lifetime", "bound": 250}),
    ],
)
def test_a_budget_cap_stops_the_run_after_the_prefix_and_is_recorded(tmp_path, flags, iterations, cap):
    run_id = "20261202T000000Z-cap001"
    args = [
        "rl-harness",
        run_helpers.FAKE,
        "--run-id",
        run_id,
        "--results-dir",
        str(tmp_path / "r"),
        "--artifacts-dir",
        str(tmp_path / "a"),
        *flags,
    ]
    assert cli.main(args) == 0
    rows = records.read_json_lines(str(tmp_path / "a" / run_id / records.METRICS_FILE))
    assert [row["training_iteration"] for row in rows] == iterations  # the recipe's budget is 5
    manifest = read_manifest(str(tmp_path / "r" / run_id))
    assert manifest.status == "completed" and manifest.interrupted_by is None
    assert manifest.budget_cap == cap
    assert RowBudget(**manifest.budget_cap).run_flags() == flags


def test_the_reproduction_is_asked_to_stop_where_the_prefix_ends():
    manifest = RunManifest.from_dict(
        {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "seed": 3,
            "hardware": {"profile": {"name": "cpu"}},
            "options": {"smoke": True},
        }
    )
    arguments = reproduce._run_arguments(manifest, "new", "/r", "/a", RowBudget.of(None, 800))
    assert arguments[-3:] == ["--stop-at-env-steps", "800", "--smoke"]
    assert "--stop-at-iteration" not in reproduce._run_arguments(manifest, "new", "/r", "/a", RowBudget())


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        ({"name": "cpu", "env_runner": "batched"}, "batched"),
        ({"name": "cpu", "env_runner": "rllib"}, "rllib"),
        ({"name": "cpu"}, "rllib"),
    ],
)  # recorded before --env-runner
def test_the_reproduction_samples_with_the_recorded_env_runner(recorded, expected):
    manifest = RunManifest.from_dict(
        {"schema_version": MANIFEST_SCHEMA_VERSION, "seed": 3, "hardware": {"profile": recorded}, "options": {}}
    )
    arguments = reproduce._run_arguments(manifest, "new", "/r", "/a", RowBudget())
    assert arguments[arguments.index("--env-runner") + 1] == expected


def test_the_prefix_and_the_cap_end_at_the_same_row():
    rows = [{"training_iteration": i, "num_env_steps_sampled_lifetime": 100 * i} for i in range(1, 6)]
    budget = RowBudget.of(None, 250)
    assert budget.take(rows) == rows[:3] and [budget.reached(row) for row in rows[:3]] == [False, False, True]


def test_a_stale_scratch_folder_is_replaced_and_released_afterwards(repo, tmp_path, monkeypatch):
    worktree = tmp_path / "scratch"
    worktree.mkdir()
    (worktree / "left_over.txt").write_text("from an interrupted reproduction")  # not a registered worktree
    checkout.check_out(str(repo), run_helpers.git(repo, "rev-parse", "HEAD").strip(), "run run-1", str(worktree))
    assert (worktree / "recipe.py").read_text() == "LR = 0.1\n" and not (worktree / "left_over.txt").exists()
    calls = tmp_path / "bazel_calls"
    fake_bazel = tmp_path / "bazel"
    fake_bazel.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake_bazel.chmod(0o755)
    monkeypatch.setenv(env_vars.BAZEL_ENV, str(fake_bazel))
    checkout.release(str(repo), str(worktree))
    assert calls.read_text() == "shutdown\n" and not worktree.exists()
    assert run_helpers.git(repo, "worktree", "list").count("\n") == 1  # only the repository itself


def test_a_metrics_file_cut_mid_line_is_named_as_damaged_not_as_a_divergence(tmp_path):
    path = tmp_path / records.METRICS_FILE
    path.write_text('{"training_iteration": 1}\n{"training_iteration": 2}\n{"training_itera')
    with pytest.raises(
        records.RecordError,
        match=r"metrics.jsonl:3 is cut mid-line: run r's metrics are damaged"
        r" .*restore the file from git or B2, .*--iterations 2",
    ):
        reproduce._metrics(str(tmp_path), "r", "completed")
    assert [row["training_iteration"] for row in reproduce._metrics(str(tmp_path), "r", "crashed")] == [1, 2]
    assert path.read_text().endswith('{"training_itera')  # nothing is lost
