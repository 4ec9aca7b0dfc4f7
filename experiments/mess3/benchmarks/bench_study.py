"""Four Mess3 runs as one study vs one after another: wall time end to end, as a user runs them.

    bazel run //experiments/mess3:bench_study                           # prints one JSON object (a few minutes)
    bazel run //experiments/mess3:bench_study -- --env-steps 131072     # full runs capped at 2^17 env steps
    bazel run //experiments/mess3:bench_study -- --full                 # full budgets (figures: docs/performance.md)

The same four members (memoryless_agent and reward_only, seeds 0 and 1; smoke budgets, or full
ones, or full ones capped with --env-steps as `--stop-at-env-steps` caps a run) run twice into
fresh temporary folders: `sequential` is four `rl-harness <recipe> --seed S`
processes one after another, `study` is `rl-harness study experiments.mess3.benchmarks.bench_study` (this
module is the study), which runs them as Tune trials, as many at once as there are CPUs. Both
include every process start, Ray's start-up and each run's scoring and probes. `speedup` is
sequential / study.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from rl.harness import Study

STUDY = Study(
    agents={"memoryless": "experiments.mess3.memoryless_agent", "reward_only": "experiments.mess3.reward_only"},
    seeds=(0, 1),
)
_CLI = (sys.executable, "-m", "rl.harness.commands.cli")
_THIS_STUDY = "experiments.mess3.benchmarks.bench_study"  # by name: run as a binary, this file is __main__


def _timed(commands: list[list[str]]) -> float:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    started = time.perf_counter()
    for command in commands:
        subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    budgets = parser.add_mutually_exclusive_group()
    budgets.add_argument("--full", action="store_true", help="full budgets instead of smoke")
    budgets.add_argument("--env-steps", type=int, help="full budgets, each run capped at this many env steps")
    args = parser.parse_args()
    if args.env_steps:
        budget, name = ["--stop-at-env-steps", str(args.env_steps)], f"full, capped at {args.env_steps} env steps"
    else:
        budget, name = ([], "full") if args.full else (["--smoke"], "smoke")
    figures = {
        "members": len(STUDY.members()),
        "budget": name,
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_1min_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory() as scratch:

        def roots(name):
            return [
                "--results-dir",
                os.path.join(scratch, name, "results"),
                "--artifacts-dir",
                os.path.join(scratch, name, "artifacts"),
            ]

        figures["sequential_s"] = round(
            _timed(
                [
                    [*_CLI, STUDY.agents[member.agent], "--seed", str(member.seed), *budget, *roots("sequential")]
                    for member in STUDY.members()
                ]
            ),
            1,
        )
        figures["study_s"] = round(_timed([[*_CLI, "study", _THIS_STUDY, *budget, *roots("study")]]), 1)
    figures["speedup"] = round(figures["sequential_s"] / figures["study_s"], 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
