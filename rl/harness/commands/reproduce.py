"""`rl-harness reproduce <run-id>`: rebuild a recorded run from its provenance, re-run it, compare.

    original = finder.find_run("20261202T031703Z-b1b3c5", [workspace])
    exit_code = reproduce.reproduce(original, prefix=RowBudget.of(iterations=2, env_steps=None))
    reproduce.reproduce(original, trust_patch=True)   # a recorded patch that changes code: applied only so

Steps: the recorded commit in a scratch `git worktree` (one fixed folder per repository, so its
Bazel output base and venv are reused), the saved patch applied and its hash checked, the
manifest's `build.target` built and its identity compared input by input, the target run with
the recorded seed and options, then metrics.jsonl compared row by row. A recorded patch is shown
file by file and applied only when it changes nothing but documentation, or with `--trust-patch`. The verdict goes into
the new run's manifest (`reproduction`); the original run's folders are only read.

The numeric platform (run/platform.py) is compared first: on the original's, rows must agree as
`runner.determinism` says; on another, the first divergent row is reported and the outcome is
judged statistically (`cross_platform`): "identical", "consistent (platform differs)" or "diverged".
The original's metrics come from this machine, else from the configured store; where they are
nowhere and the platform differs, the statistical verdict rests on the run's committed summary
(`reproduce_inputs`). A run that sized itself by `$RL_HARNESS_CPUS` is reproduced under the same share.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import re
import signal
import subprocess
import tempfile
from typing import Any

from absl import logging

from rl.harness import env_vars
from rl.harness.commands import checkout, cross_platform, reproduce_inputs
from rl.harness.errors import EXIT_USAGE, HarnessError, UsageError
from rl.harness.run import buildinfo, finder, hyperparameters, platform, provenance, records
from rl.harness.run.layout import RunLayout
from rl.harness.run.machine import MachineFacts
from rl.harness.run.manifest import RunManifest, read_manifest, runner_determinism
from rl.harness.run.rows import ITERATION_KEY, RowBudget
from rl.harness.run.status import COMPLETED, CRASHED, new_run_id
from rl.harness.training import hardware, numeric_platform

# Rows of runs that are not bit-deterministic are compared with this relative tolerance.
STATISTICAL_RELATIVE_TOLERANCE = 0.05
# Metric keys that measure time, throughput or the machine, never what was learned (docs/harness.md).
IGNORED_KEY_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (
        r"(^|/)timers?(/|$)",
        r"_timer(/|$)",
        r"throughput",
        r"duration",
        r"_sec(_|/|$)",
        r"^perf/",
        r"(^|/)time_",
        r"^timestamp$",
        r"^date$",
        r"^pid$",
        r"^hostname$",
        r"^node_ip$",
        r"^node_id$",
        r"^harness/logged_at$",
        r"^env_runners/sample$",
        r"^trial_id$",
    )
)
# Profile fields that decide where envs and learner run; a different value means another machine kind.
_PLACEMENT_FIELDS = ("name", "learner_device", "num_gpus_per_learner", "max_env_runners", "torch_threads", "num_cpus")


class ReproduceError(UsageError):
    """The run cannot be reproduced here; one line naming the problem and the fix (exit 2)."""


class ReproduceInterrupted(HarnessError):
    """Ctrl-C or SIGTERM while the reproduction ran: forwarded to it, which stopped cleanly; exit 128 + the signal."""

    def __init__(self, message: str, signal_name: str):
        super().__init__(message)
        self.exit_status = 128 + int(signal.Signals[signal_name])


def ignored(key: str) -> bool:
    return any(pattern.search(key) for pattern in IGNORED_KEY_PATTERNS)


def _same(a: Any, b: Any, tolerance: float) -> bool:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if tolerance and numbers:
        return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
    return a == b


def compare_rows(original: list[dict], reproduction: list[dict], tolerance: float = 0.0) -> dict:
    """Row-by-row comparison ignoring IGNORED_KEY_PATTERNS: rows compared and the first divergence.

    compare_rows([{"training_iteration": 1, "loss": 0.5}], [{"training_iteration": 1, "loss": 0.6}])
    # {"rows_compared": 1, "first_divergence": {"row": 1, "iteration": 1, "key": "loss",
    #                                            "original": 0.5, "reproduction": 0.6}}
    """
    for number, (row_a, row_b) in enumerate(zip(original, reproduction), start=1):
        for key in sorted(set(row_a) | set(row_b)):
            if not ignored(key) and not _same(row_a.get(key), row_b.get(key), tolerance):
                return {
                    "rows_compared": number,
                    "first_divergence": {
                        "row": number,
                        "iteration": row_a.get(ITERATION_KEY),
                        "key": key,
                        "original": row_a.get(key),
                        "reproduction": row_b.get(key),
                    },
                }
    compared = min(len(original), len(reproduction))
    if len(original) != len(reproduction):
        return {
            "rows_compared": compared,
            "first_divergence": {
                "row": compared + 1,
                "iteration": None,
                "key": "(row count)",
                "original": len(original),
                "reproduction": len(reproduction),
            },
        }
    return {"rows_compared": compared, "first_divergence": None}


def build_differences(recorded: dict, rebuilt: dict) -> list[str]:
    """Which build inputs differ, by name: lock, interpreter, Bazel version, each source file."""
    differences = []
    if recorded.get("lock_sha256") != rebuilt.get("lock_sha256"):
        differences.append(
            f"lock: requirements_lock.txt sha256 {recorded.get('lock_sha256')} -> {rebuilt.get('lock_sha256')}"
        )
    interpreter_a, interpreter_b = recorded.get("interpreter") or {}, rebuilt.get("interpreter") or {}
    for key in ("version", "executable_sha256", "libpython_sha256"):
        if interpreter_a.get(key) != interpreter_b.get(key):
            differences.append(f"interpreter: {key} {interpreter_a.get(key)} -> {interpreter_b.get(key)}")
    if recorded.get("bazel_version") != rebuilt.get("bazel_version"):
        differences.append(f"Bazel version: {recorded.get('bazel_version')} -> {rebuilt.get('bazel_version')}")
    sources_a, sources_b = recorded.get("sources"), rebuilt.get("sources") or {}
    if sources_a is None:
        if recorded.get("sources_sha256") != rebuilt.get("sources_sha256"):
            differences.append("source files: their combined hash differs (the run recorded no per-file hashes)")
        return differences
    for path in sorted(set(sources_a) | set(sources_b)):
        if path not in sources_b:
            differences.append(f"source file {path}: not in the rebuilt binary")
        elif path not in sources_a:
            differences.append(f"source file {path}: new in the rebuilt binary")
        elif sources_a[path] != sources_b[path]:
            differences.append(f"source file {path}: content differs")
    return differences


def check_machine(manifest: RunManifest, machine: MachineFacts) -> None:
    """Raises ReproduceError when this machine would place the run differently (another machine kind)."""
    recorded = manifest.hardware.get("profile") or {}
    try:
        here = hardware.choose_profile(recorded.get("name", "auto"), machine).as_dict()
    except hardware.HardwareError as error:
        raise ReproduceError(
            f"run {manifest.run_id} ran with hardware profile {recorded.get('name')!r},"
            f" which this machine cannot give ({error}); reproduce it on such a machine"
        ) from None
    for field in _PLACEMENT_FIELDS:
        if recorded.get(field) != here.get(field):
            raise ReproduceError(
                f"run {manifest.run_id} ran on another machine kind: profile {field}"
                f" {recorded.get(field)!r} there, {here.get(field)!r} here; reproduce it on a"
                f" machine like the one in its manifest (`{buildinfo.harness_command('show', manifest.run_id)}`)"
            )


def platform_here(manifest: RunManifest, machine: MachineFacts, environment: dict) -> platform.NumericPlatform:
    """The numeric platform the reproduction will run on: this machine, under the run's profile (its pins too)."""
    profile = hardware.choose_profile(manifest.hardware["profile"]["name"], machine)
    return numeric_platform.probe({**environment, **hardware.process_environment(profile)})


def format_platform_comparison(recorded: platform.NumericPlatform | None, here: platform.NumericPlatform) -> str:
    """One line: the same numeric platform as the original's, or the fields that differ (with both values)."""
    if recorded is None:
        return "platform: the original recorded none (an older manifest); rows are compared as on its machine"
    fields = platform.differences(recorded, here)
    if not fields:
        return "platform: the same numeric platform as the original's"
    return (
        "platform differs from the original's: "
        + "; ".join(platform.describe_difference(recorded, here, field) for field in fields)
        + " -- identical rows are not expected; the outcome is judged statistically"
    )


def compare_outcome(
    original: finder.Run,
    original_rows: list[dict] | None,
    reproduction: finder.Run,
    reproduction_rows: list[dict],
    prefix: RowBudget,
) -> dict:
    """The rows and, on another numeric platform, the outcome: what the verdict records (module docstring).

    Same platform (or none recorded): rows compared as `runner.determinism` says. Another platform:
    rows compared exactly (the first divergence), then, if they differ, the outcome judged statistically
    (with a prefix, the summarised metrics at its last row: the run had not concluded there). Without
    the original's rows (`original_rows` None, no prefix) the outcome alone is judged, from its summary.
    """
    determinism = runner_determinism(original.manifest.runner)
    recorded = original.manifest.platform
    fields = [] if recorded is None else platform.differences(recorded, reproduction.manifest.platform)
    found = {
        "expected": "statistical" if fields or not determinism["expected"] else "identical",
        "determinism": determinism,
        "platform_differences": None if recorded is None else fields,
    }
    if original_rows is None:
        comparison = {"rows_compared": 0, "first_divergence": None}
    elif not fields:
        tolerance = 0.0 if determinism["expected"] else STATISTICAL_RELATIVE_TOLERANCE
        comparison = compare_rows(original_rows, reproduction_rows, tolerance)
        return {
            **found,
            "tolerance": tolerance,
            **comparison,
            "verdict": "diverged"
            if comparison["first_divergence"]
            else "identical"
            if tolerance == 0.0
            else "within tolerance",
        }
    else:
        comparison = compare_rows(original_rows, reproduction_rows)
        if comparison["first_divergence"] is None:
            return {**found, "tolerance": 0.0, **comparison, "verdict": "identical"}
    if prefix.key is None:
        mine, theirs = (cross_platform.quantities(run.summary(), ignored) for run in (original, reproduction))
    else:
        mine, theirs = (
            cross_platform.quantities_at_row(original.summary(), rows[-1] if rows else {}, ignored)
            for rows in (original_rows, reproduction_rows)
        )
    judgement = cross_platform.judge(mine, theirs, cross_platform.study_spread(original, ignored), original_rows or [])
    return {**found, "tolerance": 0.0, **comparison, "verdict": judgement["verdict"], "judgement": judgement}


# -- checkout and build ----------------------------------------------------------------------


def apply_patch(worktree: str, patch_path: str, run_id: str, commit: str) -> None:
    if os.path.getsize(patch_path) == 0:
        return
    done = subprocess.run(
        ["git", "-C", worktree, "apply", "--binary", patch_path], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["git apply failed"])[0]
        raise ReproduceError(
            f"the saved patch of run {run_id} ({patch_path}) no longer applies to commit"
            f" {commit[:12]}: {reason}; restore the patch from git or B2"
        )


def _run_arguments(
    manifest: RunManifest, run_id: str, results_root: str, artifacts_root: str, prefix: RowBudget
) -> list[str]:
    """The recorded seed, profile, overrides and smoke switch; the run stops where the compared prefix ends."""
    options = manifest.options
    profile = manifest.hardware["profile"]
    # A run recorded before --env-runner existed sampled with RLlib's EnvRunner.
    arguments = [
        "--seed",
        str(manifest.seed),
        "--hardware-profile",
        profile["name"],
        "--env-runner",
        profile.get("env_runner", hardware.RLLIB_ENV_RUNNER),
        "--run-id",
        run_id,
        "--results-dir",
        results_root,
        "--artifacts-dir",
        artifacts_root,
        "--no-upload-artifacts",
        *prefix.run_flags(),
        *hyperparameters.set_arguments(options.get("set") or {}),
    ]
    return arguments + (["--smoke"] if options.get("smoke") else [])


# -- the whole command -----------------------------------------------------------------------


def _layout(run: finder.Run, artifacts_root: pathlib.Path | None) -> RunLayout:
    """The original run's folders: its results root, and `artifacts_root` (given here) or the artifacts root
    beside the results; the reproduction goes beside it. Never the artifacts folder the manifest names
    (RunLayout.of_run)."""
    if not run.manifest.paths.get("artifacts"):
        raise ReproduceError(f"run {run.run_id} recorded no artifacts folder; its metrics cannot be compared")
    try:
        return RunLayout.of_run(run.run_dir, run.manifest, artifacts_root)
    except records.RecordError as error:
        raise ReproduceError(str(error)) from None


def _validate(run: finder.Run) -> tuple[str, str | None]:
    """(repository commit, patch path or None); ReproduceError for runs that cannot be rebuilt."""
    manifest = run.manifest
    if not manifest.build.get("target"):
        raise ReproduceError(
            f"run {run.run_id} did not run from a Bazel binary (no build.target); only runs of an"
            " rl_experiment or rl_py_binary target can be rebuilt"
        )
    if manifest.parent_run:
        raise ReproduceError(
            f"run {run.run_id} resumed run {manifest.parent_run.get('parent_run_id')}; reproduce"
            " a run that started fresh"
        )
    repo = manifest.code.get("experiment_repo") or {}
    if not repo.get("commit"):
        raise ReproduceError(f"run {run.run_id} recorded no git commit ({repo.get('reason')}); it cannot be rebuilt")
    if not repo.get("dirty"):
        return repo["commit"], None
    patch = patch_path(run.run_dir, (repo.get("patch") or {}).get("file", records.PATCH_FILE), run.run_id)
    if not os.path.exists(patch):
        raise ReproduceError(
            f"run {run.run_id} ran from a dirty checkout but its results hold no {records.PATCH_FILE}"
            " (recorded before patches were saved); its change cannot be rebuilt"
        )
    return repo["commit"], patch


# -- trust: a recorded patch is code ------------------------------------------------------------

# Files a patch may change without being code: documentation and pictures (never built, never run).
_INERT_SUFFIXES = (".md", ".rst", ".txt", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf")
_BUILD_FILE_PREFIXES = ("requirements", "constraints")  # requirements*.txt decide what is installed


def patch_path(run_dir: str, name: object, run_id: str) -> str:
    """The path of the patch a manifest names: a plain file name inside the run's folder, else ReproduceError."""
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or os.path.isabs(name)
    ):
        raise ReproduceError(
            f"run {run_id}'s manifest names its patch {name!r}, not a file name inside its folder;"
            " the record was edited: restore it from git or B2"
        )
    path = os.path.join(run_dir, name)
    if os.path.islink(path):
        raise ReproduceError(
            f"the patch {path} of run {run_id} is a symbolic link; a recorded patch is a plain file"
            " inside the run's folder: restore it from git or B2"
        )
    return path


def patch_files(patch: str) -> list[str]:
    """The files `patch` creates, changes, renames or deletes (as `git apply` reads it), sorted.

    Read in an empty folder outside any repository: inside one (Bazel's runfiles tree under `bazel
    run`, a subfolder of a checkout) `git apply` skips the patch's paths outside the current folder
    and would list none of them. A non-empty patch that names no file is refused (fails closed).
    """
    with tempfile.TemporaryDirectory(prefix="rl-harness-patch-") as empty:
        environment = {**os.environ, "GIT_CEILING_DIRECTORIES": os.path.dirname(empty)}
        listed = subprocess.run(
            ["git", "apply", "--numstat", "-z", os.path.abspath(patch)],
            cwd=empty,
            env=environment,
            capture_output=True,
            timeout=60,
            check=False,
        )
    if listed.returncode != 0:
        reason = (listed.stderr.decode(errors="replace").strip().splitlines() or ["git apply failed"])[0]
        raise ReproduceError(
            f"the recorded patch {patch} is not a patch git can read ({reason}); restore it from git or B2"
        )
    fields, files = iter(listed.stdout.decode(errors="replace").split("\0")), set()
    for field in fields:
        name = field.split("\t", 2)[-1] if field.count("\t") >= 2 else None
        if name == "":  # a rename: the old and the new name follow
            files.update((next(fields, ""), next(fields, "")))
        elif name:
            files.add(name)
    files.discard("")
    if not files and os.path.getsize(patch) > 0:
        raise ReproduceError(
            f"the recorded patch {patch} is not empty but git reads no file in it; it is not a patch"
            " this harness wrote: restore it from git or B2"
        )
    return sorted(files)


def is_code(path: str) -> bool:
    """True unless `path` is documentation or a picture (`_INERT_SUFFIXES`); requirements files are build files."""
    name = os.path.basename(path).lower()
    return name.startswith(_BUILD_FILE_PREFIXES) or not name.endswith(_INERT_SUFFIXES)


def check_patch_trust(patch: str, run_id: str, trusted: bool) -> list[str]:
    """Shows the files the recorded patch touches; ReproduceError when it changes code and `trusted` is False.

    The patch is applied, built and run with this user's environment: a shared run's patch is its
    author's code. Returns the files it touches.
    """
    files = patch_files(patch)
    code = [name for name in files if is_code(name)]
    print(f"the recorded patch {patch} touches {len(files)} file(s): {', '.join(files) or 'none'}")
    if code and not trusted:
        raise ReproduceError(
            f"the recorded patch of run {run_id} changes code or build files ({', '.join(code)}):"
            f" reproducing builds and runs them as you; read {patch} and pass --trust-patch to"
            " apply it (docs/harness.md, Trust)"
        )
    return files


def _metrics(
    artifacts_dir: str, run_id: str, status: str, recorded_elsewhere: pathlib.Path | None = None
) -> list[dict]:
    """The run's rows; a row cut mid-line is damage (RecordError) unless the run crashed while writing it."""
    path = os.path.join(artifacts_dir, records.METRICS_FILE)
    if not os.path.exists(path):
        elsewhere = (
            f", or, if the folder its manifest names ({recorded_elsewhere}) is yours, pass its artifacts root"
            " with --artifacts-dir"
            if recorded_elsewhere
            else ""
        )
        raise ReproduceError(
            f"metrics of run {run_id} are neither on this machine ({path}) nor in a configured store;"
            f" fetch that folder from where the run is shared (docs/artifact_storage.md){elsewhere}"
        )
    rows = records.read_json_lines(path)
    torn = records.torn_final_line(path)
    if torn is not None and status != CRASHED:
        before = f", or compare the rows before it with --iterations {rows[-1][ITERATION_KEY]}" if rows else ""
        raise records.RecordError(
            f"{path}:{torn} is cut mid-line: run {run_id}'s metrics are damaged (it ended"
            f" {status}, not crashed); restore the file from git or B2{before}"
        )
    return rows


def reproduce(
    original: finder.Run,
    *,
    prefix: RowBudget = RowBudget(),
    repo_root: str | None = None,
    trust_patch: bool = False,
    artifacts_root: pathlib.Path | None = None,
) -> int:
    """Rebuilds and re-runs `original`; prints the verdict; 0 when it reproduced (identical, within tolerance or
    consistent across platforms), 1 when it diverged.

    Prints what it will build before anything runs: the commit, the target and the recorded patch's
    files. A recorded patch that changes code is applied only with `trust_patch` (`check_patch_trust`).
    The original's metrics are read under `artifacts_root` (or the artifacts root beside its results).
    """
    manifest = original.manifest
    commit, patch = _validate(original)
    print(f"reproducing run {original.run_id}: commit {commit}, target {manifest.build['target']}", flush=True)
    if patch is not None:
        check_patch_trust(patch, original.run_id, trust_patch)
    cpu_share = reproduce_inputs.recorded_cpu_share(manifest)
    environment = checkout.child_environment(cpu_share)
    if cpu_share is not None:
        print(
            f"applying the run's recorded CPU limit: ${env_vars.CPU_SHARE_ENV}={cpu_share}"
            f" ({manifest.hardware['machine']['cpu_limit']})",
            flush=True,
        )
    machine = hardware.detect_machine(environment)
    check_machine(manifest, machine)
    here = platform_here(manifest, machine, environment)
    print(format_platform_comparison(manifest.platform, here), flush=True)
    layout = _layout(original, artifacts_root)
    evidence = reproduce_inputs.bring_metrics(original.run_id, layout)
    if (
        evidence is None
        and manifest.platform is not None
        and platform.differences(manifest.platform, here)
        and prefix.key is None
    ):
        evidence, original_rows = reproduce_inputs.SUMMARY_EVIDENCE, None
        print(
            f"evidence: {evidence} (neither here nor in a store); the platform differs, so the outcome is judged"
            " statistically from the summary",
            flush=True,
        )
    else:
        original_rows = prefix.take(
            _metrics(str(layout.artifacts_dir), original.run_id, original.status, layout.recorded_elsewhere(manifest))
        )
    repo_root = repo_root or provenance.git_state(env_vars.workspace_directory() or os.getcwd())["root"]
    if repo_root is None:
        raise ReproduceError("not inside a git checkout; run reproduce from the repository the run came from")
    worktree = checkout.scratch_worktree(repo_root)
    try:
        checkout.check_out(repo_root, commit, f"run {original.run_id}", worktree)
        patch_verified = None
        if patch is not None:
            apply_patch(worktree, patch, original.run_id, commit)
            patch_verified = (
                provenance.git_state(worktree)["diff_sha256"] == manifest.code["experiment_repo"]["diff_sha256"]
            )
            if not patch_verified:
                logging.warning(
                    "the patch does not recreate the recorded change exactly (diff_sha256 differs; left out:"
                    " %s): the build comparison below names what differs",
                    manifest.code["experiment_repo"].get("patch", {}).get("omitted") or "nothing recorded",
                )
        target = manifest.build["target"]
        rebuilt = checkout.build(worktree, target)
        differences = build_differences(manifest.build, rebuilt)
        reproduction_id = new_run_id()
        returncode, stopped_by = checkout.run_forwarding_signals(
            [
                *checkout.bazel(worktree),
                "run",
                *checkout.python_override(worktree),
                "--",
                target,
                *_run_arguments(
                    manifest, reproduction_id, str(layout.results_root), str(layout.artifacts_root), prefix
                ),
            ],
            cwd=worktree,
            env=environment,
        )
        if stopped_by is not None:
            found = layout.with_run_id(reproduction_id).results_dir
            status = read_manifest(str(found)).effective_status if found.is_dir() else "not started"
            raise ReproduceInterrupted(
                f"reproduction {reproduction_id} of run {original.run_id} stopped by {stopped_by}"
                f" (exit {returncode}, the run {status}); nothing was compared: reproduce"
                " again to compare",
                stopped_by,
            )
        if returncode == EXIT_USAGE and prefix.key is not None:
            raise ReproduceError(
                f"the reproduction of {target} refused its options (exit {EXIT_USAGE}, log above): a"
                f" harness older than {prefix.run_flags()[0]} cannot stop at a prefix;"
                " reproduce without --iterations/--env-steps"
            )
        if returncode != 0:
            raise ReproduceError(
                f"the reproduction run {reproduction_id} of {target} exited {returncode}; see its log"
                " above and its manifest"
            )
    finally:
        checkout.release(repo_root, worktree)
    reproduction = layout.with_run_id(reproduction_id)
    new_dir = str(reproduction.results_dir)
    new_manifest = read_manifest(new_dir)
    outcome = compare_outcome(
        original,
        original_rows,
        finder.Run(new_dir, new_manifest),
        prefix.take(_metrics(str(reproduction.artifacts_dir), reproduction_id, COMPLETED)),
        prefix,
    )
    verdict = {
        "parent_run": original.run_id,
        "prefix": dataclasses.asdict(prefix),
        "patch_verified": patch_verified,
        "build_hash_match": rebuilt["build_hash"] == manifest.build["build_hash"],
        "build_differences": differences,
        "evidence": evidence,
        **outcome,
    }
    records.write_json_atomically(
        os.path.join(new_dir, records.MANIFEST_FILE), dataclasses.replace(new_manifest, reproduction=verdict).to_dict()
    )
    print("\n".join(format_verdict(verdict, reproduction_id)))
    return 1 if verdict["verdict"] == cross_platform.DIVERGED else 0


def format_verdict(verdict: dict, new_run_id: str) -> list[str]:
    if verdict.get("platform_differences"):
        expected = (
            "the numeric platform differs (" + ", ".join(verdict["platform_differences"]) + "): rows compared"
            " exactly, the outcome judged statistically"
        )
    elif verdict["expected"] == "identical":
        expected = "identical expected (" + verdict["determinism"]["why"] + ")"
    else:
        expected = (
            f"statistical comparison only, relative tolerance {verdict['tolerance']} ({verdict['determinism']['why']})"
        )
    lines = [
        f"reproduction {new_run_id} of {verdict['parent_run']}: {expected}",
        f"  build hash: {'same' if verdict['build_hash_match'] else 'DIFFERENT'}",
    ]
    lines += [f"    {difference}" for difference in verdict["build_differences"]]
    if verdict["patch_verified"] is not None:
        lines.append(
            f"  patch: {'recreates the recorded change' if verdict['patch_verified'] else 'differs from the recorded change'}"
        )
    divergence = verdict["first_divergence"]
    if verdict.get("evidence"):
        lines.append(f"  the original's evidence: {verdict['evidence']}")
    lines.append(f"  rows compared: {verdict['rows_compared']}")
    if divergence:
        lines.append(
            f"  first divergence: row {divergence['row']} (iteration {divergence['iteration']}),"
            f" {divergence['key']}: {json.dumps(divergence['original'])} -> {json.dumps(divergence['reproduction'])}"
        )
    if verdict.get("judgement"):
        lines += cross_platform.format_judgement(verdict["judgement"])
    lines.append(f"verdict: {verdict['verdict']}")
    return lines
