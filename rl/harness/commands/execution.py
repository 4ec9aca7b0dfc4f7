"""One run from validated request to final status: plan_run (no records yet), execute, upload.

    plan = execution.plan_run(options, "experiments.mess3.reward_only")   # UsageError naming the fix
    exit_code = execution.execute(plan)    # 0 completed, 1 failed, 128 + signal interrupted, 3 upload failed

Everything that can be wrong with the request is found in `plan_run`, before any record is written.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import os
import pathlib
import shutil
import signal
import sys
import traceback
from collections.abc import Callable

from absl import logging

from rl.harness import env_vars
from rl.harness.commands import catalog, recipes, resume
from rl.harness.errors import EXIT_FAILED, EXIT_UPLOAD_FAILED, HarnessError, NothingToDo, UsageError
from rl.harness.remote import run_mirror, stores
from rl.harness.remote.store import CredentialsError, Store, StoreConfig
from rl.harness.run import begin, finder, manifest, provenance, records, redaction, seeding, session
from rl.harness.run.context import RunContext
from rl.harness.run.hyperparameters import Hyperparameters
from rl.harness.run.layout import RunIdTaken, RunLayout, iter_run_dirs
from rl.harness.run.machine import HardwareProfile, MachineFacts
from rl.harness.run.manifest import ResumeSource, read_manifest
from rl.harness.run.rolling import RollingCadence
from rl.harness.run.rows import RowBudget
from rl.harness.run.status import COMPLETED, FAILED, INTERRUPTED, new_run_id, run_id_problem
from rl.harness.training import cluster, hardware, numeric_platform

TRACEBACK_FILE = "traceback.txt"  # in artifacts/<run-id>/ of a failed run
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class StartFailed(UsageError):
    """A run could not write its first records (a full disk, a folder gone read-only): refused, nothing left behind."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """A validated run request: everything is checked before any record is written."""

    module: object
    module_name: str
    options: argparse.Namespace
    layout: RunLayout
    resume: ResumeSource | None
    machine: MachineFacts
    profile: HardwareProfile
    upload: Store | None  # opened and checked
    upload_explicit: bool
    mirror_s: tuple[float, float]  # the mirror's interval and its drain at the end (env_vars.mirror_seconds)
    heartbeat_s: float
    patch_cap_bytes: int
    hyperparameters: dict  # the recipe's declared defaults with the --set overrides applied


def store_config(options: argparse.Namespace) -> StoreConfig | None:
    """The store a run (or a study, `options.smoke` and `options.upload_artifacts`) mirrors to, or None."""
    if options.upload_artifacts is False:
        return None
    try:
        config = stores.load()
    except CredentialsError as error:
        if options.upload_artifacts:
            raise UsageError(str(error)) from None
        logging.warning("not uploading: %s", error)
        return None
    if options.upload_artifacts and config is None:
        raise UsageError(f"--upload-artifacts needs a store: {stores.NO_STORE_FIX}")
    if options.upload_artifacts is None and options.smoke:
        return None  # smoke runs are mirrored only when asked for
    return config


def _checked_store(config: StoreConfig, connect_store: Callable, layout: RunLayout, module_name: str) -> Store:
    """The store, reachable, with the bucket there and a key that may write; its run prefix free.
    StoreUnusable or UsageError (exit 2) naming the fix otherwise."""
    store = connect_store(config)
    store.check()
    run_prefix = layout.remote_prefix(config.prefix, module_name)
    if store.list_keys(run_prefix):
        raise UsageError(
            f"store {config.scheme}://{config.bucket}/{run_prefix} already holds a run's records, which"
            " are never overwritten; choose another --run-id"
        )
    return store


def plan_run(options: argparse.Namespace, module_name: str, connect_store: Callable = stores.open_store) -> Plan:
    """Validates a run request; raises UsageError naming the fix."""
    if options.run_id is not None and (problem := run_id_problem(options.run_id)):
        raise UsageError(problem)
    heartbeat_s = env_vars.heartbeat_seconds()  # each a EnvVarError (a UsageError) naming the fix
    mirror_s = env_vars.mirror_seconds()
    patch_cap_bytes = env_vars.patch_cap_bytes()
    connect_timeout_s = env_vars.ray_connect_timeout_seconds()
    module = recipes.load_recipe(module_name)
    if not options.allow_untracked_code and (reason := provenance.no_commit_reason(os.path.realpath(module.__file__))):
        raise UsageError(
            f"{module_name} is not in a git checkout with a commit ({reason}), so the run could not record"
            " which code produced it; commit it (git init, git add, git commit), or pass"
            " --allow-untracked-code to record the sha256 of each .py file beside it instead"
        )
    declared = getattr(module, "HYPERPARAMETERS", None) or Hyperparameters({})
    if options.set and not declared.defaults:
        raise UsageError(
            f"{module_name} declares no hyperparameters to --set; declare them in the recipe:"
            " HYPERPARAMETERS = Hyperparameters({'ppo/lr': 1e-3, ...}) (docs/harness.md)"
        )
    overrides = declared.parse(options.set)
    options = argparse.Namespace(**{**vars(options), "set": overrides})  # the manifest records the typed overrides
    results_root, artifacts_root = recipes.run_roots(options.results_dir, options.artifacts_dir, module_name)
    layout = RunLayout(results_root, artifacts_root, options.run_id or new_run_id(), options.smoke)
    for folder, flag in ((layout.results_dir, "--results-dir"), (layout.artifacts_dir, "--artifacts-dir")):
        if folder.exists():
            raise RunIdTaken(folder)
        recipes.check_writable(folder, flag)
    parent = resume.resolve_resume(options.resume_from, results_root, artifacts_root) if options.resume_from else None
    if parent is not None:
        resume.check_experiment(parent, options.resume_from, module_name)
    config = store_config(options)
    upload = None if config is None else _checked_store(config, connect_store, layout, module_name)
    machine = hardware.detect_machine()
    profile = hardware.choose_profile(options.hardware_profile, machine, options.env_runner)
    numeric_platform.check_pinned(profile)
    if options.ray_address:  # last: it may wait for the cluster's answer (at most $RL_HARNESS_RAY_CONNECT_TIMEOUT_S)
        cluster.check_address(options.ray_address, timeout_s=connect_timeout_s)
    return Plan(
        module,
        module_name,
        options,
        layout,
        parent,
        machine,
        profile,
        upload,
        bool(options.upload_artifacts),
        mirror_s,
        heartbeat_s,
        patch_cap_bytes,
        declared.values(overrides),
    )


def report_crashed_runs(results_root: pathlib.Path) -> None:
    for run_dir in iter_run_dirs(str(results_root)):
        try:
            document = read_manifest(run_dir)
        except records.RecordError as error:
            logging.warning("skipping an unreadable run: %s", error)
            continue
        reason = document.crash_reason()
        if reason:
            logging.warning(
                "run %s crashed (%s); its records up to the crash are intact; resume it with `%s`",
                document.run_id,
                reason,
                catalog.resume_command(finder.Run(run_dir, document)),
            )


def guard_secrets() -> None:
    """Registers the environment's secrets and the configured store's key (`redaction`) and redacts every line the
    log prints.

    The filter sits on the handlers (absl's, the root logger's), so it covers every logger's records.
    """
    stores.register_secrets()
    for name in redaction.register_environment_secrets():
        logging.warning(
            "$%s is shorter than %d characters, too short to mask safely: it is not redacted from the run's records",
            name,
            redaction.MIN_SECRET_LENGTH,
        )
    redaction.redact_handler(logging.get_absl_handler())
    redaction.install_log_filter("")


def execute(plan: Plan, verbosity: int | None = None) -> int:
    layout = plan.layout
    guard_secrets()
    report_crashed_runs(layout.results_root)
    hardware.apply_process_settings(plan.profile)
    try:
        layout.mark_roots()  # before the code state is taken: the roots are outputs, whatever their names
    except OSError as failure:  # a full or unwritable root: nothing of the run exists yet
        raise StartFailed(
            f"run {layout.run_id} could not start (nothing was kept): {_problem(failure, layout)}"
        ) from None
    seeds = seeding.SeedStreams(plan.options.seed)
    document = begin.new_manifest(
        source_file=plan.module.__file__,
        module_name=plan.module_name,
        command_line=plan.options._argv,
        seed=plan.options.seed,
        options=vars(plan.options),
        layout=layout,
        hardware={"profile": plan.profile.as_dict(), "machine": plan.machine.as_dict()},
        platform=numeric_platform.gather(),
        resume=plan.resume,
    )
    patches = begin.capture_patches(document.code, plan.patch_cap_bytes)
    run = session.RunSession(
        layout=layout,
        manifest=document,
        seeds=seeds,
        heartbeat_s=plan.heartbeat_s,
        verbosity=verbosity,
        budget_cap=RowBudget.of(plan.options.stop_at_iteration, plan.options.stop_at_env_steps),
        rolling=RollingCadence(plan.options.rolling_checkpoint_minutes, plan.options.rolling_checkpoint_fraction),
    )
    try:
        run.start()
        if plan.resume is not None:
            run.carry(plan.resume)
        for file_name, patch in patches.items():
            run.write_results_file(file_name, patch)
    except OSError as failure:  # after the claim (claim failures are UsageErrors): both folders are this run's
        _discard(run, FAILED, failure)
        raise StartFailed(
            f"run {layout.run_id} could not start (nothing was kept): {_problem(failure, layout)}"
        ) from None
    mirror = None
    if plan.upload is not None:
        log = env_vars.member_log()  # a study member's output, on whichever node ran it
        also = {f"artifacts/{records.MEMBER_LOG_FILE}": pathlib.Path(log)} if log else {}
        mirror = run_mirror.LiveMirror(
            run_mirror.RunMirror(plan.upload, layout, plan.module_name, also=also), interval_s=plan.mirror_s[0]
        )
        mirror.start()
    logging.info(
        "run %s of %s (profile %s): results %s, artifacts %s",
        layout.run_id,
        plan.module_name,
        plan.profile.name,
        layout.results_dir,
        layout.artifacts_dir,
    )
    if plan.resume is not None:
        logging.info("%s", resume.describe(plan.resume))
    context = RunContext(
        run_id=layout.run_id,
        recipe=plan.module_name,
        seed=plan.options.seed,
        smoke=plan.options.smoke,
        results_dir=layout.results_dir,
        artifacts_dir=layout.artifacts_dir,
        hardware=plan.profile,
        resume=plan.resume,
        ray_address=plan.options.ray_address,
        seeds=seeds,
        session=run,
        hyperparameters=plan.hyperparameters,
    )
    error = None
    try:
        outcome = plan.module.run(context)
        if outcome is not None:
            run.set_summary_section("outcome", manifest.json_safe(outcome))
        status = INTERRUPTED if run.stop_signal else COMPLETED  # a reached budget cap completes
    except NothingToDo as nothing:  # raised before anything was trained or written: the run is not kept
        _discard(run, COMPLETED, None)
        raise NothingToDo(f"{nothing} (run {layout.run_id} was not kept)") from None
    except KeyboardInterrupt as interrupt:
        status, error = INTERRUPTED, interrupt
    except BaseException as failure:  # noqa: BLE001 - SystemExit from a library is a failure too
        status, error = (INTERRUPTED if run.stop_signal else FAILED), failure
        full = disk_full(failure, layout)
        described = redaction.redact(traceback.format_exc())
        try:
            records.write_text_atomically(str(layout.artifacts_dir / TRACEBACK_FILE), described)
        except OSError:
            if full is None:
                raise
        known = full or (str(failure) if isinstance(failure, HarnessError) else lost_process(failure, layout))
        if known is None:
            logging.error("run %s %s: %s", layout.run_id, status, described)
        else:  # the cause is known and named: no traceback (it is in traceback.txt when there was room)
            logging.error("run %s %s: %s", layout.run_id, status, known)
    if status == INTERRUPTED:
        exit_code = _interrupted_exit_code(run)
    else:
        exit_code = 0 if status == COMPLETED else EXIT_FAILED
    try:
        run.finish(status, error=error, exit_code=exit_code)
    except OSError as failure:
        if (full := disk_full(failure, layout)) is None:
            raise
        logging.error(
            "run %s %s, and its records could not say so (it reads as crashed): %s", layout.run_id, status, full
        )
        return exit_code
    logging.info("run %s %s: %s", layout.run_id, status, layout.results_dir)
    if mirror is not None:
        exit_code = _drain(plan, run, mirror, exit_code)
    return exit_code


def _discard(run: session.RunSession, status: str, error: BaseException | None) -> None:
    """Ends a run that did nothing (it could not start, or had nothing to do) and removes both its folders: its
    id stays free."""
    with contextlib.suppress(OSError):
        run.finish(
            status, error=error, exit_code=EXIT_FAILED if error else 0
        )  # stops the heartbeat, gives the signals back
    for folder in (run.layout.results_dir, run.layout.artifacts_dir):
        shutil.rmtree(folder, ignore_errors=True)


def _chain(failure: BaseException | None) -> list[BaseException]:
    """`failure` and the errors it was raised from or during, outermost first."""
    chain = []
    while failure is not None and failure not in chain:
        chain.append(failure)
        failure = failure.__cause__ or failure.__context__
    return chain


def lost_process(failure: BaseException, layout: RunLayout) -> str | None:
    """For a Ray actor's death or silence anywhere in `failure`'s chain (an EnvRunner or Learner process killed,
    its machine lost, or no result in time): one line saying so and how to continue the run.

    Its traceback says nothing about the cause (it is in traceback.txt all the same).
    """
    exceptions = sys.modules.get("ray.exceptions")  # a run that never imported Ray lost no actor
    faults = () if exceptions is None else (exceptions.RayActorError, exceptions.GetTimeoutError)
    if not any(isinstance(error, faults) for error in _chain(failure)):
        return None
    text = str(failure).strip()
    said = text.splitlines()[0] if text else type(failure).__name__
    if "--resume-from" in said:
        return said
    return (
        f"a process of the run died or stopped answering ({said}); continue the run from its last checkpoint with "
        f"--resume-from {layout.run_id}"
    )


def disk_full(failure: BaseException, layout: RunLayout) -> str | None:
    """For a full disk anywhere in `failure`'s chain: one line naming the folder, its free space and the fix."""
    full = [
        error
        for error in _chain(failure)
        if (isinstance(error, OSError) and error.errno in DISK_FULL) or "No space left on device" in str(error)
    ]
    if not full:
        return None
    roots = {"--results-dir": layout.results_root, "--artifacts-dir": layout.artifacts_root}
    named = [
        flag
        for flag, root in roots.items()
        for error in full
        if isinstance(error, OSError) and error.filename and pathlib.Path(str(error.filename)).is_relative_to(root)
    ]
    flag = named[0] if named else min(roots, key=lambda flag: shutil.disk_usage(_existing(roots[flag])).free)
    return f"{no_space_left(roots[flag], flag)}; free space there or pass another {flag}"


def no_space_left(folder: pathlib.Path, flag: str) -> str:
    """`no space left on the device of <folder> (<flag>): 12 KiB free of 200 KiB`."""
    usage = shutil.disk_usage(_existing(folder))
    return f"no space left on the device of {folder} ({flag}): {_size(usage.free)} free of {_size(usage.total)}"


def _existing(folder: pathlib.Path) -> pathlib.Path:
    """`folder`, or its nearest ancestor that exists (a root not made yet lies on that ancestor's device)."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def _problem(failure: OSError, layout: RunLayout) -> str:
    return disk_full(failure, layout) or f"{failure.strerror or failure}: {failure.filename}"


def _size(size: int) -> str:
    """`200 KiB`, `12.5 MiB`, `3.1 GiB`."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 2**10:.0f} KiB"


def _interrupted_exit_code(run: session.RunSession) -> int:
    return 128 + int(getattr(signal, run.stop_signal or "SIGINT"))


def _drain(plan: Plan, run: session.RunSession, mirror: run_mirror.LiveMirror, exit_code: int) -> int:
    """Waits (at most the drain time) for the store to take what the run left; the manifest says what is remote."""
    config = plan.upload.config
    remote = {
        "store": config.url,
        "bucket": config.bucket,
        "explicit": plan.upload_explicit,
        "run_prefix": mirror.mirror.run_prefix,
    }
    try:
        with run.signals_stop_at_once():  # the drain cannot poll stop_requested: a signal ends it at once
            record = mirror.finish(drain_s=plan.mirror_s[1])
        remote.update(status=record["status"], files=len(record["files"]), not_uploaded=len(record["not_uploaded"]))
        if record["status"] != "complete":
            remote["error"] = record["error"]["message"]
            if plan.upload_explicit and exit_code == 0:
                exit_code = EXIT_UPLOAD_FAILED
    except KeyboardInterrupt:
        record = mirror.halt()
        remote.update(status="interrupted", files=len(record["files"]), not_uploaded=len(record["not_uploaded"]))
        logging.warning(
            "mirroring to the store interrupted; what is not remote is listed in %s (docs/artifact_storage.md)",
            records.REMOTE_ARTIFACTS_FILE,
        )
        exit_code = _interrupted_exit_code(run)
        run.update_manifest(status=INTERRUPTED, interrupted_by=run.stop_signal)
    run.update_manifest(remote=remote, exit_code=exit_code)
    return exit_code
