"""`study --resume <id>` from a checkout whose code or lock is not the study's: the study's commit resumes it.

    commit = study_commit.recorded_commit(record, differs)  # UsageError unless the study ran from a committed tree
    status = study_commit.resume(record, commit, options, repo_root, results_root, artifacts_root)

The study's commit is checked out clean in a scratch worktree and built there (`checkout.py`, as
`reproduce` does), and that build's own `study --resume` runs what is left and any `--seeds` added,
writing into this checkout's results and artifacts folders. So the new members' manifests record
the study's commit and lock, whatever this checkout holds, and the study's record and summary take
them in beside the members it has. A commit the repository lacks is refused in one line.
"""

from __future__ import annotations

import argparse
import pathlib

from rl.harness import env_vars
from rl.harness.commands import checkout
from rl.harness.errors import UsageError
from rl.harness.study.record import StudyRecord

HARNESS_TARGET = "//rl/harness:rl-harness"


def recorded_commit(record: StudyRecord, differs: str) -> str:
    """The commit `record`'s members ran at; UsageError when they ran from uncommitted changes (no commit has them),
    or when this process is that commit's own build and its code or lock still `differs` (said in words)."""
    if env_vars.at_study_commit():  # checking the commit out again would start this process again
        raise UsageError(f"study {record.study_id} cannot resume at its commit: its {differs}; start a new study")
    code = record.code.get("experiment_repo") or {}
    if not code.get("commit"):
        raise UsageError(
            f"study {record.study_id} recorded no git commit ({code.get('reason')}); resume it from the"
            " checkout it ran in, or start a new study"
        )
    if code.get("dirty"):  # (the library's state, where it is another repository, its build checks)
        raise UsageError(
            f"study {record.study_id} ran from uncommitted changes to commit {code['commit'][:12]}: no"
            " commit holds its code, so only that same checkout can resume it; or start a new study"
        )
    return code["commit"]


def _study_arguments(
    record: StudyRecord, options: argparse.Namespace, results_root: pathlib.Path, artifacts_root: pathlib.Path
) -> list[str]:
    """The `study --resume` the study's build runs: this one's options, its folders made explicit."""
    arguments = [
        "study",
        record.module,
        "--resume",
        record.study_id,
        "--results-dir",
        str(results_root),
        "--artifacts-dir",
        str(artifacts_root),
        "--cpus-per-trial",
        str(options.cpus_per_trial),
    ]
    if options.seeds:
        arguments += ["--seeds", ",".join(map(str, options.seeds))]
    if options.max_concurrent is not None:
        arguments += ["--max-concurrent", str(options.max_concurrent)]
    if options.ray_address:
        arguments += ["--ray-address", options.ray_address]
    return arguments + (["--smoke"] if record.smoke else []) + (["--retry-failed"] if options.retry_failed else [])


def resume(
    record: StudyRecord,
    commit: str,
    options: argparse.Namespace,
    repo_root: str,
    results_root: pathlib.Path,
    artifacts_root: pathlib.Path,
) -> int:
    """Resumes `record` at `commit` (its `recorded_commit`), built in a scratch worktree of `repo_root`; its exit
    status."""
    worktree = checkout.scratch_worktree(repo_root, "study")
    print(
        f"study {record.study_id} ran at commit {commit[:12]}, this checkout is not that: resuming it from that"
        f" commit, checked out clean in {worktree} and built there ({HARNESS_TARGET})",
        flush=True,
    )
    try:
        checkout.check_out(repo_root, commit, f"study {record.study_id}", worktree)
        status, _ = checkout.run_forwarding_signals(
            [
                *checkout.bazel(worktree),
                "run",
                *checkout.python_override(worktree),
                "--",
                HARNESS_TARGET,
                *_study_arguments(record, options, results_root, artifacts_root),
            ],
            cwd=worktree,
            env={**checkout.child_environment(), env_vars.AT_STUDY_COMMIT_ENV: "1"},
        )
    finally:
        checkout.release(repo_root, worktree)
    return status
