"""The rl-harness command line: run a recipe, list runs, show one, diff two.

    rl-harness <dotted.module> [--smoke] [--seed 42] [--resume-from RUN_ID|CHECKPOINT]
               [--hardware-profile auto|cpu|cuda|mps] [--results-dir DIR] [--artifacts-dir DIR]
               [--run-id ID] [--upload-artifacts | --no-upload-artifacts] [--ray-address ADDRESS]
               [--stop-at-iteration N | --stop-at-env-steps N]
    rl-harness runs [--results-dir DIR]
    rl-harness show <run-id> [--json] [--results-dir DIR]
    rl-harness diff <run-a> <run-b> [--results-dir DIR]
    rl-harness reproduce <run-id> [--iterations N | --env-steps N] [--results-dir DIR]

    bazel run //rl/harness:rl-harness -- experiments.mess3.reward_only --smoke
    bazel run //experiments/mess3:reward_only -- --smoke      # an rl_experiment binary: module fixed
    python -m rl.harness.cli rl.harness.tests.fake_recipe --results-dir /tmp/r --artifacts-dir /tmp/a

Flags are parsed by absl's argparse integration (subcommands, a positional module and
`--no-...` switches need argparse; absl adds --verbosity and friends) and logs go through
absl logging. Bad input exits 2 with one line naming the fix; a failed run exits 1, an
interrupted one 128 + the signal number, a failed explicit upload 3.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import os
import pathlib
import re
import signal
import sys
import traceback
from typing import Callable, Optional

from absl import app, logging
from absl.flags import argparse_flags

from rl.harness import b2_mirror, buildinfo, catalog, hardware, provenance, records, reproduce, seeding, session
from rl.harness.context import ResumeSource, RunContext

EXIT_FAILED = 1
EXIT_USAGE = reproduce.EXIT_USAGE  # defined there: reproduce tells a refused reproduction by it
EXIT_UPLOAD_FAILED = 3
COMMANDS = ("runs", "show", "diff", "reproduce")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_RLLIB_CHECKPOINT_FILE = "rllib_checkpoint.json"
# Resolve the file, not its folder: under `bazel run` the folder is a real directory
# of the runfiles tree (outside any checkout) holding symlinks into the source tree.
_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))


class UsageError(Exception):
    """Bad input: printed as one line that names the fix, exit status 2."""


class _Parser(argparse_flags.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see --help\n")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--seed must be a non-negative integer, got {text!r}")
    return value


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _add_results_dir(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--results-dir", type=pathlib.Path, help=help_text)


def _run_parser(experiment: Optional[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="rl-harness" if experiment is None else experiment,
                     description="Run an experiment recipe's run(context) with full provenance.")
    if experiment is None:
        parser.add_argument("module", help="dotted module of a recipe with run(context)")
    parser.add_argument("--seed", type=_seed, default=42, help="root seed (docs/seeding.md)")
    parser.add_argument("--smoke", action="store_true", help="the recipe's minimal budget; records go under smoke/")
    parser.add_argument("--resume-from", help="a checkpoint folder or a previous run id")
    parser.add_argument("--hardware-profile", choices=hardware.PROFILES, default="auto")
    _add_results_dir(parser, "folder of results/<run-id>/ (default: results/ beside the recipe)")
    parser.add_argument("--artifacts-dir", type=pathlib.Path,
                        help="folder of artifacts/<run-id>/ (default: artifacts/ beside the recipe)")
    parser.add_argument("--run-id", help="name of this run (default: UTC timestamp + random suffix)")
    parser.add_argument("--upload-artifacts", action=argparse.BooleanOptionalAction, default=None,
                        help="mirror to B2 (default: when credentials exist and not --smoke); see"
                             " docs/artifact_storage.md")
    parser.add_argument("--ray-address", help="attach to this Ray cluster (e.g. auto or ray://head:10001)")
    # A cap below the recipe's own budget (reproduce uses it to re-run only the compared prefix).
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument("--stop-at-iteration", type=_positive,
                     help="stop after the first metrics row at training iteration >= N")
    cap.add_argument("--stop-at-env-steps", type=_positive,
                     help="stop after the first metrics row at >= N env steps")
    return parser


def _catalog_parser(command: str, experiment: Optional[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{experiment or 'rl-harness'} {command}")
    if command == "show":
        parser.add_argument("run_id")
        parser.add_argument("--json", action="store_true", help="print the manifest as JSON")
    elif command == "diff":
        parser.add_argument("run_a")
        parser.add_argument("run_b")
    elif command == "reproduce":
        parser.add_argument("run_id")
        budget = parser.add_mutually_exclusive_group()
        budget.add_argument("--iterations", type=_positive, help="compare only the first N training iterations")
        budget.add_argument("--env-steps", type=_positive, help="compare only the rows up to N env steps")
    _add_results_dir(parser, "where to look (default: the workspace, or the experiment's results/)")
    return parser


def parse(argv: list[str], experiment: Optional[str] = None) -> tuple[str, argparse.Namespace]:
    """(command, options) from a full argv (argv[0] is the program)."""
    args = list(argv[1:])
    if args and args[0] in COMMANDS:
        return args[0], _catalog_parser(args[0], experiment).parse_args(args[1:])
    options = _run_parser(experiment).parse_args(args)
    options._argv = list(argv)  # recorded as the manifest's command line
    return "run", options


# -- locations ------------------------------------------------------------------------------


def recipe_folder(module_name: str) -> pathlib.Path:
    """Where a recipe's results/ and artifacts/ go by default: beside its source.

    Under `bazel run` that is $BUILD_WORKSPACE_DIRECTORY/<package path>, not the runfiles copy.
    """
    spec = importlib.util.find_spec(module_name)
    parts = module_name.split(".")
    if spec.submodule_search_locations is None:
        parts = parts[:-1]
    workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    if workspace:
        return pathlib.Path(workspace, *parts)
    folder = pathlib.Path(spec.origin).parent
    if ".runfiles" in folder.parts or any(part.endswith(".runfiles") for part in folder.parts):
        raise UsageError(f"{module_name} runs from Bazel runfiles outside `bazel run`;"
                         " pass --results-dir and --artifacts-dir")
    return folder


def _nested(inner: pathlib.Path, outer: pathlib.Path) -> bool:
    return inner == outer or outer in inner.parents


def run_roots(options: argparse.Namespace, module_name: str) -> tuple[pathlib.Path, pathlib.Path]:
    folder = None
    if options.results_dir is None or options.artifacts_dir is None:
        folder = recipe_folder(module_name)
    results_root = (options.results_dir or folder / "results").expanduser().resolve()
    artifacts_root = (options.artifacts_dir or folder / "artifacts").expanduser().resolve()
    if _nested(results_root, artifacts_root) or _nested(artifacts_root, results_root):
        raise UsageError(f"results ({results_root}) and artifacts ({artifacts_root}) must be separate folders,"
                         " neither inside the other: results are small and committed, artifacts big and"
                         " git-ignored; change --results-dir or --artifacts-dir")
    return results_root, artifacts_root


# -- recipe loading -------------------------------------------------------------------------


def _import_recipe(module_name: str):
    """The module, or None if the recipe itself (not one of its imports) is missing."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            return None
        raise UsageError(f"importing {module_name} failed: {error}; install or add that dependency") from None
    except Exception as error:
        raise UsageError(f"importing {module_name} failed: {type(error).__name__}: {error}") from None


def _look_in_workspace(module_name: str, workspace: str) -> None:
    """Lets `module_name` be imported from the source tree, also inside packages the binary has."""
    sys.path.append(workspace)
    parts = module_name.split(".")
    for depth in range(1, len(parts)):
        package = sys.modules.get(".".join(parts[:depth]))
        folder = os.path.join(workspace, *parts[:depth])
        if package is not None and hasattr(package, "__path__") and os.path.isdir(folder):
            if folder not in package.__path__:
                package.__path__.append(folder)
    importlib.invalidate_caches()


def load_recipe(module_name: str):
    """The recipe module; under `bazel run` a module outside the binary is found in the workspace."""
    if not _DOTTED.fullmatch(module_name):
        raise UsageError(f"{module_name!r} is not a dotted module name; pass e.g. experiments.mess3.reward_only")
    module = _import_recipe(module_name)
    workspace = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    if module is None and workspace and workspace not in sys.path:
        _look_in_workspace(module_name, workspace)
        module = _import_recipe(module_name)
        if module is not None:
            logging.warning("%s was imported from the source tree %s: it is not covered by this binary's build"
                            " hash; an rl_experiment target makes it so", module_name, workspace)
    if module is None:
        raise UsageError(f"no module named {module_name!r}: check the dotted name and run from the repository"
                         " root (or give the recipe an rl_experiment target)")
    if not callable(getattr(module, "run", None)):
        raise UsageError(f"{module_name} has no run(context) function; define `def run(context): ...` in it")
    return module


# -- resume ---------------------------------------------------------------------------------


def checkpoint_source(path: pathlib.Path, parent_run_id: Optional[str] = None) -> ResumeSource:
    if not path.is_dir() or not os.access(path, os.R_OK | os.X_OK):
        raise UsageError(f"checkpoint {path} is not a readable folder; pass a checkpoint folder"
                         " (artifacts/<run-id>/checkpoints/iter_N) or a run id")
    state_file = path / records.CHECKPOINT_STATE_FILE
    if state_file.exists():
        try:
            state = records.read_json(str(state_file), "checkpoint state")
        except records.RecordError as error:
            raise UsageError(f"{error}; pass another checkpoint") from None
        return ResumeSource(checkpoint=path, parent_run_id=parent_run_id or state.get("run_id"),
                            iteration=state.get("iteration"), env_steps=state.get("env_steps"))
    if (path / _RLLIB_CHECKPOINT_FILE).exists():
        return ResumeSource(checkpoint=path, parent_run_id=parent_run_id)
    raise UsageError(f"{path} is not a checkpoint (no {records.CHECKPOINT_STATE_FILE} or {_RLLIB_CHECKPOINT_FILE});"
                     " pass a checkpoint folder (artifacts/<run-id>/checkpoints/iter_N) or a run id")


def _parent_artifacts(manifest: dict, artifacts_root: pathlib.Path, run_dir: str) -> list[pathlib.Path]:
    """Where the parent's artifacts may be: as recorded, else under this run's artifacts root."""
    smoke = os.path.basename(os.path.dirname(run_dir)) == records.SMOKE_DIR
    candidates = [artifacts_root / records.SMOKE_DIR / manifest["run_id"] if smoke else artifacts_root / manifest["run_id"]]
    recorded = (manifest.get("paths") or {}).get("artifacts")
    return ([pathlib.Path(recorded)] if recorded else []) + candidates


def resolve_resume(value: str, results_root: pathlib.Path, artifacts_root: pathlib.Path) -> ResumeSource:
    path = pathlib.Path(value).expanduser()
    if path.exists():
        return checkpoint_source(path.resolve())
    if records.run_id_problem(value) is None:
        run_dir = next((str(folder) for folder in (results_root / value, results_root / records.SMOKE_DIR / value)
                        if (folder / records.MANIFEST_FILE).exists()), None)
        if run_dir is not None:
            return _resume_from_run(value, run_dir, artifacts_root)
    raise UsageError(f"--resume-from {value!r} is neither a checkpoint folder nor a run under {results_root};"
                     " pass a checkpoint path or the id of a run listed by `rl-harness runs`")


def _resume_from_run(run_id: str, run_dir: str, artifacts_root: pathlib.Path) -> ResumeSource:
    try:
        manifest = records.read_manifest(run_dir)
    except records.RecordError as error:
        raise UsageError(str(error)) from None
    runner = manifest.get("runner") or {}
    places = _parent_artifacts(manifest, artifacts_root, run_dir)
    if runner.get("kind") == "tune":
        for place in places:
            storage = place / runner["storage"]
            if storage.is_dir():
                return ResumeSource(checkpoint=None, parent_run_id=run_id, tune_experiment=storage)
        raise UsageError(f"the Tune storage of run {run_id} is not on this machine (looked in"
                         f" {', '.join(map(str, places))}); fetch artifacts/{run_id} (docs/artifact_storage.md)")
    checkpoints = manifest.get("checkpoints") or []
    if not checkpoints:
        raise UsageError(f"run {run_id} recorded no checkpoint to resume from; start a new run instead")
    trials = sorted({c["trial_id"] for c in checkpoints if c.get("trial_id")})
    if trials:
        raise UsageError(f"run {run_id} saved checkpoints for several trials ({', '.join(trials)}), so which one to"
                         f" resume is ambiguous; pass --resume-from <checkpoint folder>"
                         f" (artifacts/{run_id}/checkpoints/<trial>/iter_N)")
    for place in places:
        folder = place / checkpoints[-1]["path"]
        if folder.is_dir():
            return checkpoint_source(folder, parent_run_id=run_id)
    raise UsageError(f"checkpoint {checkpoints[-1]['path']} of run {run_id} is not on this machine (looked in"
                     f" {', '.join(map(str, places))}); fetch artifacts/{run_id} from B2"
                     " (docs/artifact_storage.md) and pass --resume-from <checkpoint folder>")


# -- the run --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Plan:
    """A validated run request: everything is checked before any record is written."""

    module: object
    module_name: str
    options: argparse.Namespace
    run_id: str
    results_root: pathlib.Path
    artifacts_root: pathlib.Path
    results_dir: pathlib.Path
    artifacts_dir: pathlib.Path
    resume: Optional[ResumeSource]
    machine: hardware.MachineFacts
    profile: hardware.HardwareProfile
    upload: Optional[b2_mirror.B2Credentials]
    upload_explicit: bool
    heartbeat_s: float
    patch_cap_bytes: int


def _upload_credentials(options: argparse.Namespace) -> Optional[b2_mirror.B2Credentials]:
    if options.upload_artifacts is False:
        return None
    try:
        credentials = b2_mirror.load_credentials()
    except b2_mirror.CredentialsError as error:
        if options.upload_artifacts:
            raise UsageError(str(error)) from None
        logging.warning("not uploading: %s", error)
        return None
    if options.upload_artifacts and credentials is None:
        raise UsageError(f"--upload-artifacts needs B2 credentials: set ${b2_mirror.KEY_ID_ENV},"
                         f" ${b2_mirror.KEY_ENV} and ${b2_mirror.BUCKET_ENV}, or write"
                         f" {b2_mirror.DEFAULT_CREDENTIALS_FILE} (docs/artifact_storage.md)")
    if options.upload_artifacts is None and options.smoke:
        return None  # smoke runs are mirrored only when asked for
    return credentials


def prepare(options: argparse.Namespace, module_name: str) -> Plan:
    """Validates a run request; raises UsageError naming the fix."""
    if options.run_id is not None and (problem := records.run_id_problem(options.run_id)):
        raise UsageError(problem)
    try:
        heartbeat_s = session.heartbeat_interval_from_env()
        patch_cap_bytes = provenance.patch_cap_from_env()
    except ValueError as error:
        raise UsageError(str(error)) from None
    module = load_recipe(module_name)
    results_root, artifacts_root = run_roots(options, module_name)
    run_id = options.run_id or records.new_run_id()
    subfolder = [records.SMOKE_DIR] if options.smoke else []
    results_dir = results_root.joinpath(*subfolder, run_id)
    artifacts_dir = artifacts_root.joinpath(*subfolder, run_id)
    for folder in (results_dir, artifacts_dir):
        if folder.exists():
            raise UsageError(f"{folder} already exists; choose another --run-id (or omit it)")
    resume = resolve_resume(options.resume_from, results_root, artifacts_root) if options.resume_from else None
    upload = _upload_credentials(options)
    machine = hardware.detect_machine()
    try:
        profile = hardware.choose_profile(options.hardware_profile, machine)
    except hardware.HardwareError as error:
        raise UsageError(str(error)) from None
    return Plan(module, module_name, options, run_id, results_root, artifacts_root, results_dir, artifacts_dir,
                resume, machine, profile, upload, bool(options.upload_artifacts), heartbeat_s, patch_cap_bytes)


def report_crashed_runs(results_root: pathlib.Path) -> None:
    for run_dir in records.iter_run_dirs(str(results_root)):
        try:
            manifest = records.read_manifest(run_dir)
        except records.RecordError as error:
            logging.warning("skipping an unreadable run: %s", error)
            continue
        reason = records.crash_reason(manifest)
        if reason:
            logging.warning("run %s crashed (%s); its records up to the crash are intact; resume it with"
                            " --resume-from %s", manifest["run_id"], reason, manifest["run_id"])


def _manifest_base(plan: Plan) -> dict:
    source = os.path.realpath(plan.module.__file__)
    experiment_repo = provenance.git_state(source)
    build = buildinfo.current().as_dict()
    options = {key: (str(value) if isinstance(value, pathlib.Path) else value)
               for key, value in sorted(vars(plan.options).items()) if key != "module" and not key.startswith("_")}
    return {
        "experiment": {"module": plan.module_name,
                       # relative to its repository, so committed records carry no machine's paths
                       "source_file": (os.path.relpath(source, experiment_repo["root"])
                                       if experiment_repo["root"] else source),
                       "source_sha256": provenance.file_sha256(source)},
        "code": {"experiment_repo": experiment_repo,
                 "library": {**provenance.git_state(_HARNESS_DIR),
                             "build_stamp_commit": build.get("git_commit"),
                             "pinned": build.get("library")}},
        "build": build,
        "versions": provenance.package_versions(),
        "command_line": plan.options._argv,
        "process_command_line": list(getattr(sys, "orig_argv", sys.argv)),
        "seed": plan.options.seed,
        "options": options,
        "paths": {"results": str(plan.results_dir), "artifacts": str(plan.artifacts_dir)},
        "hardware": {"profile": plan.profile.as_dict(), "machine": plan.machine.as_dict()},
        "parent_run": plan.resume.as_dict() if plan.resume else None,
        "runner": None,
        "remote": None,
    }


def _capture_patches(code: dict, cap_bytes: int) -> dict[str, bytes]:
    """The patch of each dirty repository (one file when experiment and library share a checkout).

    Records it in the repo's manifest entry (`patch`: file, bytes, omitted files) and warns when
    untracked files were left out, since the run then cannot be rebuilt exactly.
    """
    patches, by_root = {}, {}
    for name, state in code.items():
        if not state.get("dirty"):
            continue
        if state["root"] not in by_root:
            file_name = records.PATCH_FILE if not by_root else f"uncommitted_{name}.patch"
            change = provenance.uncommitted_change(state["root"], cap_bytes)
            if change.omitted:
                logging.warning("the run's patch leaves out %d untracked file(s) over $%s=%d bytes (%s):"
                                " `rl-harness reproduce` cannot rebuild this checkout exactly; commit them,"
                                " git-ignore them or raise the cap", len(change.omitted), provenance.PATCH_CAP_ENV,
                                cap_bytes, ", ".join(change.omitted[:5]))
            patches[file_name] = change.patch
            by_root[state["root"]] = {"file": file_name, "bytes": len(change.patch), "omitted": change.omitted}
        state["patch"] = by_root[state["root"]]
    return patches


def _json_safe(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def execute(plan: Plan, connect_b2: Callable = b2_mirror.connect, verbosity: Optional[int] = None) -> int:
    report_crashed_runs(plan.results_root)
    hardware.apply_process_settings(plan.profile)
    seeds = seeding.SeedStreams(plan.options.seed)
    manifest = _manifest_base(plan)
    patches = _capture_patches(manifest["code"], plan.patch_cap_bytes)
    run = session.RunSession(run_id=plan.run_id, results_dir=plan.results_dir, artifacts_dir=plan.artifacts_dir,
                             manifest=manifest, seeds=seeds, heartbeat_s=plan.heartbeat_s, verbosity=verbosity,
                             budget_cap=records.RowBudget.of(plan.options.stop_at_iteration,
                                                             plan.options.stop_at_env_steps))
    run.start()
    for file_name, patch in patches.items():
        run.write_results_file(file_name, patch)
    logging.info("run %s of %s (profile %s): results %s, artifacts %s", plan.run_id, plan.module_name,
                 plan.profile.name, plan.results_dir, plan.artifacts_dir)
    context = RunContext(run_id=plan.run_id, experiment=plan.module_name, seed=plan.options.seed,
                         smoke=plan.options.smoke, results_dir=plan.results_dir, artifacts_dir=plan.artifacts_dir,
                         hardware=plan.profile, resume=plan.resume, ray_address=plan.options.ray_address,
                         seeds=seeds, recorder=run)
    error = None
    try:
        outcome = plan.module.run(context)
        if outcome is not None:
            run.set_summary_section("outcome", _json_safe(outcome))
        status = records.INTERRUPTED if run.stop_signal else records.COMPLETED  # a reached budget cap completes
    except KeyboardInterrupt as interrupt:
        status, error = records.INTERRUPTED, interrupt
    except BaseException as failure:  # noqa: B902 - SystemExit from a library is a failure too
        status, error = (records.INTERRUPTED if run.stop_signal else records.FAILED), failure
        with open(plan.artifacts_dir / "traceback.txt", "w") as handle:
            handle.write(traceback.format_exc())
        logging.error("run %s %s: %s", plan.run_id, status, traceback.format_exc())
    if status == records.INTERRUPTED:
        number = getattr(signal, run.stop_signal or "SIGINT")
        exit_code = 128 + int(number)
    else:
        exit_code = 0 if status == records.COMPLETED else EXIT_FAILED
    run.finish(status, error=error, exit_code=exit_code)
    logging.info("run %s %s: %s", plan.run_id, status, plan.results_dir)
    if plan.upload is not None:
        exit_code = _upload(plan, run, connect_b2, exit_code)
    return exit_code


def _upload(plan: Plan, run: session.RunSession, connect_b2: Callable, exit_code: int) -> int:
    remote = {"bucket": plan.upload.bucket, "explicit": plan.upload_explicit}
    try:
        mirror = connect_b2(plan.upload)
        record = mirror.upload_run(experiment=plan.module_name, run_id=plan.run_id, smoke=plan.options.smoke,
                                   results_dir=plan.results_dir, artifacts_dir=plan.artifacts_dir)
        remote.update(status=record["status"], run_prefix=record["run_prefix"], files=len(record["files"]))
    except b2_mirror.UploadError as error:
        remote.update(status="failed", error=str(error))
        logging.error("upload to B2 failed; everything stays local: %s", error)
        if plan.upload_explicit and exit_code == 0:
            exit_code = EXIT_UPLOAD_FAILED
    run.update_manifest(remote=remote, exit_code=exit_code)
    return exit_code


# -- runs / show / diff ---------------------------------------------------------------------


def _catalog_roots(options: argparse.Namespace, experiment: Optional[str]) -> list[str]:
    if options.results_dir is not None:
        return [str(options.results_dir)]
    if experiment is not None:
        return [str(recipe_folder(experiment) / "results")]
    return [os.environ.get("BUILD_WORKSPACE_DIRECTORY") or os.getcwd()]


def run_catalog(command: str, options: argparse.Namespace, experiment: Optional[str]) -> list[str]:
    roots = _catalog_roots(options, experiment)
    if command == "runs":
        return catalog.format_runs(catalog.find_runs(roots))
    if command == "show":
        run = catalog.find_run(options.run_id, roots)
        if options.json:
            return [json.dumps({**run.manifest, "effective_status": run.status}, indent=2, sort_keys=True)]
        return catalog.format_show(run)
    return catalog.format_diff(catalog.find_run(options.run_a, roots), catalog.find_run(options.run_b, roots))


def dispatch(command: str, options: argparse.Namespace, experiment: Optional[str] = None,
             connect_b2: Callable = b2_mirror.connect) -> int:
    """Runs one parsed command; returns the exit status."""
    verbosity = logging.get_verbosity()  # before the recipe's imports (RLlib raises the root level)
    try:
        if command == "reproduce":
            original = catalog.find_run(options.run_id, _catalog_roots(options, experiment))
            return reproduce.reproduce(original, prefix=records.RowBudget.of(options.iterations, options.env_steps))
        if command != "run":
            print("\n".join(run_catalog(command, options, experiment)))
            return 0
        plan = prepare(options, experiment or options.module)
    except (UsageError, catalog.RunNotFound, records.RecordError, reproduce.ReproduceError) as error:
        print(f"{experiment or 'rl-harness'}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return execute(plan, connect_b2, verbosity)


def main(argv: list[str], experiment: Optional[str] = None, connect_b2: Callable = b2_mirror.connect) -> int:
    """In-process entry (tests): parse a full argv and dispatch."""
    command, options = parse(argv, experiment)
    return dispatch(command, options, experiment, connect_b2)


def entry_point(experiment: Optional[str] = None) -> None:
    """`rl-harness` and every rl_experiment binary: absl app with argparse flags."""
    app.run(lambda parsed: dispatch(*parsed, experiment=experiment),
            flags_parser=lambda argv: parse(argv, experiment))


if __name__ == "__main__":
    entry_point()
