"""What each rl-harness command accepts: its parser, its argument types, and `parse`.

    command, options = arguments.parse(["rl-harness", "runs", "--last", "3"])   # ("runs", Namespace(...))
    command, options = arguments.parse(["rl-harness", "experiments.mess3.reward_only", "--smoke"])   # ("run", ...)

Bad input exits 2 with one line naming the fix (`_Parser.error`); `commands/cli.py` dispatches
what `parse` returns.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib

from absl.flags import argparse_flags

from rl.harness import env_vars
from rl.harness.commands import catalog, compare, export, recipes, study
from rl.harness.errors import EXIT_USAGE, HarnessError
from rl.harness.run import layout, rolling
from rl.harness.training import hardware

COMMANDS = ("runs", "show", "diff", "compare", "reproduce", "study", "sync", "fetch", "export")
_COMMANDS_HELP = """other commands (each has its own --help):
  runs                       list the runs under --results-dir (or the workspace) by start time
  show <run-id>              one run's status, results and provenance
  diff <run-a> <run-b>       what differs between two runs' records
  compare <run-id>...        several runs' learning curves in one PNG, and their final metrics
  reproduce <run-id>         rebuild the run's commit and re-run it; compare the rows
  study <study module>       agents x seeds as parallel runs, resumable, summarised with intervals
  study plan <study-id>      the seeds (and compute time) each agent needs for an interval of --width W
  sync <run-id>              send what the store lacks of a run (docs/artifact_storage.md)
  fetch <run-id | study-id>  bring a run or a study back from the store, verified (--records-only: results only)
  export --to mlflow <id>    a run, or a study (one MLflow run per member), into an MLflow tracking store"""


class _Parser(argparse_flags.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see --help\n")


class _HelpWithSetKeys(argparse.Action):
    """-h/--help of a run: the usual help, then the recipe's `--set` keys (the recipe is imported only here).

    The recipe is the experiment binary's, or the module typed before --help (argparse has read it by then).
    """

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        print("\n" + "\n".join(_set_keys_help(self.default_recipe or getattr(namespace, "module", None))))
        parser.exit()


def _set_keys_help(recipe: str | None) -> list[str]:
    """The `--set` keys `recipe` declares, each with its type, default and range, as --help lists them."""
    if recipe is None:
        return ["--set keys: each recipe's own; `rl-harness <recipe> --help` lists them"]
    try:
        declared = getattr(recipes.load_recipe(recipe), "HYPERPARAMETERS", None)
    except HarnessError as error:
        return [f"--set keys of {recipe}: cannot load the recipe ({error})"]
    if declared is None or not declared.defaults:
        return [f"--set keys of {recipe}: none (it declares no HYPERPARAMETERS)"]
    width = max(map(len, declared.defaults))
    return [f"--set keys of {recipe} (KEY=VALUE; type, default, range):"] + [
        f"  {name:<{width}}  {type(default).__name__}, default {json.dumps(default)}"
        + (f", {declared.ranges[name].describe()}" if name in declared.ranges else "")
        for name, default in sorted(declared.defaults.items())
    ]


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


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _fraction(text: str) -> float:
    value = _positive_number(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], e.g. 0.1, got {text!r}")
    return value


def _user_path(text: str) -> pathlib.Path:
    """A path as the user meant it: relative to where they typed the command ($BUILD_WORKING_DIRECTORY
    under `bazel run`, whose own working folder is the runfiles tree a rebuild may delete)."""
    return pathlib.Path(env_vars.working_directory()) / pathlib.Path(text).expanduser()


def _add_results_dir(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--results-dir", type=_user_path, help=help_text)


def _run_parser(recipe: str | None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rl-harness" if recipe is None else recipe,
        add_help=False,
        description="Run an experiment recipe's run(context) with full provenance.",
        epilog=_COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-h", "--help", action=_HelpWithSetKeys, help="show this help, with the recipe's --set keys, and exit"
    ).default_recipe = recipe
    if recipe is None:
        parser.add_argument("module", help="dotted module of a recipe with run(context)")
    parser.add_argument("--seed", type=_seed, default=42, help="root seed (docs/seeding.md)")
    parser.add_argument("--smoke", action="store_true", help="the recipe's minimal budget; records go under smoke/")
    parser.add_argument("--resume-from", help="a checkpoint folder or a previous run id")
    parser.add_argument("--hardware-profile", choices=hardware.PROFILES, default="auto")
    parser.add_argument(
        "--env-runner",
        choices=hardware.ENV_RUNNERS,
        default=hardware.BATCHED_ENV_RUNNER,
        help="what samples: the harness's batched EnvRunner or RLlib's own, which return the same"
        " episodes (docs/performance.md, 'Sampling')",
    )
    _add_results_dir(parser, "folder of results/<run-id>/ (default: results/ beside the recipe)")
    parser.add_argument(
        "--artifacts-dir", type=_user_path, help="folder of artifacts/<run-id>/ (default: artifacts/ beside the recipe)"
    )
    parser.add_argument("--run-id", help="name of this run (default: UTC timestamp + random suffix)")
    parser.add_argument(
        "--upload-artifacts",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mirror to the store (default: when one is configured and not --smoke); see docs/artifact_storage.md",
    )
    parser.add_argument("--ray-address", help="attach to this Ray cluster (e.g. auto or ray://head:10001)")
    parser.add_argument(
        "--allow-untracked-code",
        action="store_true",
        help="run a recipe outside a git checkout with a commit: recorded as such, with the sha256 of"
        " each .py file beside it instead of a commit",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter the recipe declares (repeatable), e.g. --set ppo/lr=5e-4;"
        " the keys are listed below",
    )
    parser.add_argument(
        "--rolling-checkpoint-minutes",
        type=_positive_number,
        default=rolling.DEFAULT_MINUTES,
        help="refresh the run's latest-state checkpoint after this many minutes of training"
        " (default %(default)s; docs/harness.md, 'Checkpoints')",
    )
    parser.add_argument(
        "--rolling-checkpoint-fraction",
        type=_fraction,
        default=rolling.DEFAULT_BUDGET_FRACTION,
        help="... or after this share of the budget, whichever comes first (default %(default)s)",
    )
    # A cap below the recipe's own budget (reproduce uses it to re-run only the compared prefix).
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument(
        "--stop-at-iteration", type=_positive, help="stop after the first metrics row at training iteration >= N"
    )
    cap.add_argument("--stop-at-env-steps", type=_positive, help="stop after the first metrics row at >= N env steps")
    return parser


def _catalog_parser(command: str, recipe: str | None) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{recipe or 'rl-harness'} {command}")
    if command == "study":
        study.add_arguments(parser, _user_path, _positive)
        return parser
    if command == "show":
        parser.add_argument("run_id")
        parser.add_argument("--json", action="store_true", help="print the manifest as JSON")
        parser.add_argument("--full", action="store_true", help="also every manifest field (per-file hashes too)")
    elif command == "diff":
        parser.add_argument("run_a")
        parser.add_argument("run_b")
    elif command == "compare":
        parser.add_argument("run_ids", nargs="+", metavar="run_id")
        parser.add_argument(
            "--metric",
            action="append",
            dest="metrics",
            help=f"a summarised metric to draw, repeatable (default: {', '.join(compare.DEFAULT_METRICS)})",
        )
        parser.add_argument(
            "--output",
            type=_user_path,
            help=f"the PNG to write (default: {layout.COMPARISONS_DIR}/<run ids>.png under the first"
            " run's results root)",
        )
    elif command == "runs":
        # --experiment: the same filter as scripts and muscle memory spell it.
        parser.add_argument(
            "--recipe",
            "--experiment",
            dest="recipe",
            metavar="MODULE",
            help="only this recipe's runs: its dotted module or its last parts (e.g. reward_only);"
            " a recipe's binary lists its own by default",
        )
        parser.add_argument("--status", choices=catalog.LISTED_STATUSES, help="only the runs of this status")
        parser.add_argument("--last", type=_positive, metavar="N", help="only the N most recently started")
        form = parser.add_mutually_exclusive_group()
        form.add_argument("--json", action="store_true", help="every run as a JSON record (catalog.run_rows)")
        form.add_argument(
            "--csv",
            action="store_true",
            help="every run as a CSV row, overrides, final metrics and outcome spread into columns",
        )
        budget = parser.add_mutually_exclusive_group()
        budget.add_argument("--smoke", dest="smoke", action="store_true", default=None, help="only smoke runs")
        budget.add_argument("--full", dest="smoke", action="store_false", help="only full runs (not --smoke)")
        parser.add_argument(
            "--sort",
            choices=catalog.SORT_KEYS,
            default=catalog.SORT_KEYS[0],
            help="order of the rows (default %(default)s: oldest start first)",
        )
        parser.add_argument("--store", action="store_true", help="the runs the configured store holds instead")
    elif command in ("sync", "fetch"):
        parser.add_argument("run_id")
        if command == "fetch":
            parser.add_argument("--records-only", action="store_true", help="only the run's results folder")
        parser.add_argument(
            "--artifacts-dir", type=_user_path, help="the run's artifacts root (default: beside its results)"
        )
    elif command == "export":
        parser.add_argument("id", metavar="RUN_OR_STUDY_ID", help="a run id, or a study id (with --results-dir)")
        parser.add_argument("--to", choices=export.TARGETS, required=True, help="the tracker whose store to write")
        parser.add_argument(
            "--tracking-uri",
            help=f"the MLflow store (default: sqlite:///{export.DEFAULT_STORE} in this folder, MLflow's own default)",
        )
        parser.add_argument(
            "--python",
            type=_user_path,
            help="a python with MLflow, which writes the store (default: this one, if it has MLflow)",
        )
        parser.add_argument(
            "--artifacts-dir", type=_user_path, help="the runs' artifacts root (default: beside their results)"
        )
    elif command == "reproduce":
        parser.add_argument("run_id")
        budget = parser.add_mutually_exclusive_group()
        budget.add_argument("--iterations", type=_positive, help="compare only the first N training iterations")
        budget.add_argument("--env-steps", type=_positive, help="compare only the rows up to N env steps")
        parser.add_argument(
            "--trust-patch",
            action="store_true",
            help="apply the run's recorded patch even though it changes code (it runs as you)",
        )
        parser.add_argument(
            "--artifacts-dir", type=_user_path, help="the run's artifacts root (default: beside its results)"
        )
    _add_results_dir(parser, "where to look (default: the whole workspace)")
    return parser


def parse(argv: list[str], recipe: str | None = None) -> tuple[str, argparse.Namespace]:
    """(command, options) from a full argv (argv[0] is the program)."""
    args = list(argv[1:])
    if args[:2] == ["study", "plan"]:
        parser = _Parser(prog=f"{recipe or 'rl-harness'} study plan")
        study.add_plan_arguments(parser, _user_path, _positive_number)
        return "study plan", parser.parse_args(args[2:])
    if args and args[0] in COMMANDS:
        return args[0], _catalog_parser(args[0], recipe).parse_args(args[1:])
    options = _run_parser(recipe).parse_args(args)
    options._argv = list(argv)  # recorded as the manifest's command line
    return "run", options
