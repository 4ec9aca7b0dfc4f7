"""The rl-harness command line: run a recipe, list runs, show one, diff two.

    rl-harness <dotted.module> [--smoke] [--seed 42] [--resume-from RUN_ID|CHECKPOINT]
               [--hardware-profile auto|cpu|cpu-portable|cuda|mps] [--results-dir DIR] [--artifacts-dir DIR]
               [--run-id ID] [--upload-artifacts | --no-upload-artifacts] [--ray-address ADDRESS]
               [--stop-at-iteration N | --stop-at-env-steps N] [--set KEY=VALUE ...]
               [--rolling-checkpoint-minutes M] [--rolling-checkpoint-fraction F]
    rl-harness runs [--recipe MODULE] [--status STATUS] [--last N] [--json | --csv] [--results-dir DIR]
    rl-harness show <run-id> [--json] [--results-dir DIR]
    rl-harness diff <run-a> <run-b> [--results-dir DIR]
    rl-harness compare <run-id>... [--metric KEY]... [--output PNG] [--results-dir DIR]
    rl-harness reproduce <run-id> [--iterations N | --env-steps N] [--trust-patch] [--results-dir DIR] [--artifacts-dir DIR]
    rl-harness study <dotted.study.module> [--smoke] [--resume STUDY_ID] [--max-concurrent N] [--runs A=ID,ID ...]
    rl-harness study plan <study-id> --width W [--statistic mean|median|iqm] [--score NAME] --results-dir DIR
    rl-harness sync <run-id> [--results-dir DIR] [--artifacts-dir DIR]
    rl-harness fetch <run-id | study-id> [--records-only] [--results-dir DIR] [--artifacts-dir DIR]
    rl-harness runs --store
    rl-harness export --to mlflow <run-id | study-id> [--tracking-uri URI] [--python PATH] [--results-dir DIR]

    bazel run //rl/harness:rl-harness -- experiments.mess3.reward_only --smoke
    bazel run //experiments/mess3:reward_only -- --smoke      # an rl_experiment binary: module fixed
    python -m rl.harness.commands.cli rl.harness.tests.fake_recipe --results-dir /tmp/r --artifacts-dir /tmp/a

Flags are parsed by absl's argparse integration (subcommands, a positional module and
`--no-...` switches need argparse; absl adds --verbosity and friends) and logs go through
absl logging. Bad input exits 2 with one line naming the fix; a failed run exits 1, an
interrupted one 128 + the signal number, a failed explicit upload 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from absl import app, logging

from rl.harness import env_vars
from rl.harness.commands import catalog, compare, execution, export, recipes, reproduce, study, study_transfer, transfer
from rl.harness.commands.arguments import parse
from rl.harness.errors import HarnessError
from rl.harness.remote import stores
from rl.harness.run import finder
from rl.harness.run.rows import RowBudget
from rl.harness.training import hardware

# -- runs / show / diff ---------------------------------------------------------------------


def _catalog_roots(options: argparse.Namespace) -> list[str]:
    """Where `runs`, `show`, `diff`, `compare` and `reproduce` look: --results-dir, else the whole workspace, for a
    recipe's binary as for the generic one (a run in a custom results folder is found by both; a recipe's `runs`
    lists only its own)."""
    if options.results_dir is not None:
        return [str(recipes.check_folder(options.results_dir, "--results-dir"))]
    return [env_vars.workspace_directory() or os.getcwd()]


def run_catalog(command: str, options: argparse.Namespace, recipe: str | None) -> list[str]:
    roots = _catalog_roots(options)
    if command == "runs":
        chosen = catalog.select_runs(
            *finder.scan_runs(roots),
            recipe=options.recipe or recipe,
            status=options.status,
            last=options.last,
            smoke=options.smoke,
            sort=options.sort,
        )
        if options.json:
            return [json.dumps(catalog.run_rows(*chosen), indent=2)]
        if options.csv:
            return [catalog.runs_csv(catalog.run_rows(*chosen)).rstrip("\n")]
        return catalog.format_runs(*chosen)
    if command == "show":
        run = finder.find_run(options.run_id, roots)
        if options.json:
            return [json.dumps({**run.manifest.to_dict(), "effective_status": run.status}, indent=2, sort_keys=True)]
        return catalog.format_show(run, full=options.full)
    if command == "compare":
        runs = [finder.find_run(run_id, roots) for run_id in options.run_ids]
        for warning in compare.warnings(runs, options.metrics or compare.DEFAULT_METRICS):
            print(warning, file=sys.stderr)
        output = options.output
        if output is None:
            output = compare.default_output(runs)
            output.parent.mkdir(exist_ok=True)
        compare.write_figure(runs, options.metrics or compare.DEFAULT_METRICS, output)
        return [*compare.format_table(runs), f"wrote {output}"]
    return catalog.format_diff(finder.find_run(options.run_a, roots), finder.find_run(options.run_b, roots))


def dispatch(
    command: str, options: argparse.Namespace, recipe: str | None = None, connect_store: Callable = stores.open_store
) -> int:
    """Runs one parsed command; returns the exit status."""
    verbosity = logging.get_verbosity()  # before the recipe's imports (RLlib raises the root level)
    try:
        if command == "study":
            return study.run_study(options)
        if command == "study plan":
            print(study.plan_seeds(options), end="")
            return 0
        if command == "reproduce":
            original = finder.find_run(options.run_id, _catalog_roots(options))
            return reproduce.reproduce(
                original,
                prefix=RowBudget.of(options.iterations, options.env_steps),
                trust_patch=options.trust_patch,
                artifacts_root=options.artifacts_dir,
            )
        if command == "export":
            return export.export(options, _catalog_roots(options))
        if command == "fetch":
            return study_transfer.fetch(
                options.run_id,
                results_dir=options.results_dir,
                artifacts_dir=options.artifacts_dir,
                records_only=options.records_only,
                connect_store=connect_store,
            )
        if command == "runs" and options.store:
            print("\n".join(transfer.list_store(connect_store)))
            return 0
        if command == "sync":
            return transfer.sync(
                finder.find_run(options.run_id, _catalog_roots(options)),
                artifacts_root=options.artifacts_dir,
                connect_store=connect_store,
            )
        if command != "run":
            print("\n".join(run_catalog(command, options, recipe)))
            return 0
        plan = execution.plan_run(options, recipe or options.module, connect_store)
        return execution.execute(plan, verbosity)  # raises only while claiming and starting the run
    except HarnessError as error:
        if error.exit_status == 0:  # NothingToDo: the request was done already
            print(f"{recipe or 'rl-harness'}: {error}")
        else:
            print(f"{recipe or 'rl-harness'}: error: {error}", file=sys.stderr)
        return error.exit_status


def main(argv: list[str], recipe: str | None = None, connect_store: Callable = stores.open_store) -> int:
    """In-process entry (tests): parse a full argv and dispatch."""
    command, options = parse(argv, recipe)
    return dispatch(command, options, recipe, connect_store)


def restart_with_pinned_kernels(command: str, options: argparse.Namespace) -> None:
    """Starts this process again with the cpu-portable profile's kernel dispatch in its environment.

    numpy and OpenBLAS read their switches when they load, which the CLI's own imports already did,
    so only a fresh process (and every process it starts: Ray workers, Tune trials) runs the pinned kernels.
    Returns at once for other profiles, and in the restarted process.
    """
    if command != "run" or options.hardware_profile != hardware.PORTABLE_PROFILE:
        return
    pins = hardware.portable_kernel_dispatch()
    if env_vars.kernel_dispatch_variables().items() >= pins.items():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], {**os.environ, **pins})


def entry_point(recipe: str | None = None, study_module: str | None = None) -> None:
    """`rl-harness`, every rl_experiment binary and every rl_study binary (`study <its module>` implied)."""

    def parse_argv(argv):
        return parse([argv[0], "study", study_module, *argv[1:]] if study_module else argv, recipe)

    def main_of_process(parsed):
        restart_with_pinned_kernels(*parsed)
        return dispatch(*parsed, recipe=recipe)

    app.run(main_of_process, flags_parser=parse_argv)


if __name__ == "__main__":
    entry_point()
