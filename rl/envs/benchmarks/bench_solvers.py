"""The reference solver on the classic POMDP files against SARSOP: `bazel run //rl/envs:bench_solvers`.

Prints one JSON object: {"files": {"<file name>": {"lower", "upper", "seconds", "peak_mib",
"sarsop_lower", "sarsop_upper", "rollout_mean", "rollout_standard_error", "rollout_episodes",
"trace"}}, ...run_info}. Each file is solved by `solve_pomdp` with a 60 s budget (--budget) in
a forked process of its own, so `peak_mib` is that process's peak resident memory (the
interpreter and numpy, about 50 MiB, included). The policy is then rolled out in POMDPEnv
(--episodes; fewer on TagAvoid, whose dense belief updates are slow). Progress goes to stderr.
Run it on one core: `OMP_NUM_THREADS=1 ./bazelw run //rl/envs:bench_solvers`.

SARSOP's figures (`pomdpsol --timeout 60`, lower and upper bound at the start belief) are those
of ../shared/reference/pomdp/README.md, measured on a 2-core machine of this kind; machine.POMDP
has none (its references are the shared notes' bounds 373.37 and 661.86).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pathlib
import resource
import sys

from rl.envs.benchmarks.run_info import run_info
from rl.envs.pomdp import load_pomdp
from rl.envs.solvers import rollout_value, solve_pomdp

TESTDATA = pathlib.Path(__file__).resolve().parent.parent / "testdata"
SARSOP_60S = {  # file: (lower, upper)
    "tiger.95.POMDP": (19.3711, 19.3721),
    "4x3.95.POMDP": (1.88988, 1.89085),
    "tiger-grid.pomdp": (2.253, 2.534),
    "Hallway.pomdp": (0.992, 1.206),
    "Hallway2.pomdp": (0.350, 0.906),
    "TagAvoid.pomdp": (-6.201, -1.846),
    "machine.POMDP": (None, None),
}
ROLLOUT_EPISODES = {"TagAvoid.pomdp": 200, "machine.POMDP": 100}  # slow steps; long horizon
# machine.POMDP's discount 0.999: a tail of 1e-3 would take 16500 steps an episode, 0.5 takes 10000
ROLLOUT_TAIL = {"machine.POMDP": 0.5}


def _solve(name: str, budget: float, episodes: int) -> dict:
    pomdp = load_pomdp(TESTDATA / name)

    def report(point):
        print(f"{name}: {point.seconds:6.1f} s  lower {point.lower:.5g}  upper {point.upper:.5g}", file=sys.stderr)

    solution = solve_pomdp(pomdp, time_budget=budget, progress=report)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    estimate = rollout_value(
        pomdp,
        solution.action,
        episodes=ROLLOUT_EPISODES.get(name, episodes),
        seed=0,
        tail_tolerance=ROLLOUT_TAIL.get(name, 1e-3),
    )
    sarsop_lower, sarsop_upper = SARSOP_60S[name]
    every = max(1, len(solution.trace) // 10)
    return {
        "lower": solution.lower,
        "upper": solution.upper,
        "seconds": round(solution.seconds, 2),
        "peak_mib": round(peak_mib, 1),
        "sarsop_lower": sarsop_lower,
        "sarsop_upper": sarsop_upper,
        "rollout_mean": estimate.mean,
        "rollout_standard_error": estimate.standard_error,
        "rollout_episodes": estimate.episodes,
        "rollout_tail_bound": estimate.tail_bound,
        "trace": [[round(p.seconds, 2), p.lower, p.upper] for p in solution.trace[::every] + solution.trace[-1:]],
    }


def _solve_in_child(arguments, results) -> None:
    results.put(_solve(*arguments))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per file")
    parser.add_argument("--episodes", type=int, default=1000, help="rollout episodes per file")
    parser.add_argument("--files", nargs="*", default=list(SARSOP_60S), choices=list(SARSOP_60S))
    arguments = parser.parse_args()
    load = os.getloadavg()[0]
    context = multiprocessing.get_context("fork")
    files = {}
    for name in arguments.files:
        results = context.Queue()
        child = context.Process(target=_solve_in_child, args=((name, arguments.budget, arguments.episodes), results))
        child.start()
        files[name] = results.get()
        child.join()
    lines = [f"  {json.dumps(name)}: {json.dumps(figures)}" for name, figures in files.items()]
    rest = json.dumps({"budget_seconds": arguments.budget, **run_info(load)})[1:-1]
    print('{"files": {\n' + ",\n".join(lines) + "\n}, " + rest + "}")  # one line per file


if __name__ == "__main__":
    main()
