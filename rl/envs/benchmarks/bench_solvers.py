"""The reference solver on the classic POMDP files, or on a folder of them, against SARSOP: `bazel run //rl/envs:bench_solvers`.

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

Collection mode, `--collection DIR --budget-s 30` (a folder of .POMDP files, e.g. Cassandra's
collection: rl/envs/README.md says how to fetch it): every file, in name order, with the same
figures plus its size, `parse_seconds`, `cpu_seconds` of the solve (SARSOP's clock, and the budget's:
`seconds` and the trace count CPU time too) beside its `wall_seconds`, `trials`, `relative_gap` (gap over the larger |bound|),
`seconds_to_relative_gap_1e3` and `trials_to_relative_gap_1e3` (null if not reached) and, where
testdata/sarsop_collection_30s.json has SARSOP's 30 s figures for a file with the same md5,
`sarsop_lower`, `sarsop_upper`, `lower_below_sarsop` (L_sarsop - L) and `lower_below_sarsop_percent`
(100 (L_sarsop - L) / |L_sarsop|; null where L_sarsop is 0).
A file that does not load, or has discount 1, gets {"error": ...}. Policies are rolled out only
where an episode needs at most --max-rollout-steps steps (discount 0.99999 would take millions).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import pathlib
import resource
import sys
import time

from rl.envs.benchmarks.run_info import run_info
from rl.envs.pomdp import load_pomdp
from rl.envs.solvers import rollout_horizon, rollout_value, solve_pomdp

TESTDATA = pathlib.Path(__file__).resolve().parent.parent / "testdata"
SARSOP_COLLECTION = TESTDATA / "sarsop_collection_30s.json"
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


def _relative_gap(bounds) -> float:
    """(upper - lower) / max(|lower|, |upper|) of a solution or trace point."""
    return (bounds.upper - bounds.lower) / max(abs(bounds.lower), abs(bounds.upper), 1e-12)


def _solve_collection_file(path: pathlib.Path, budget: float, episodes: int, max_rollout_steps: int) -> dict:
    started = time.perf_counter()
    try:
        pomdp = load_pomdp(path)
    except Exception as error:  # noqa: BLE001 - any reader error is a figure of the collection, not a crash of the benchmark
        return {"error": f"{type(error).__name__}: {error}"}
    figures = {
        "states": pomdp.num_states,
        "actions": pomdp.num_actions,
        "observations": pomdp.num_observations,
        "discount": pomdp.discount,
        "parse_seconds": round(time.perf_counter() - started, 3),
    }
    if pomdp.discount >= 1.0:
        return {**figures, "error": "discount 1: the solvers need discount < 1"}
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    solution = solve_pomdp(pomdp, time_budget=budget)
    cpu_seconds = time.process_time() - cpu_started
    wall_seconds = time.perf_counter() - wall_started  # beside the CPU time: the core's share under the load
    closed = [index for index, point in enumerate(solution.trace) if _relative_gap(point) <= 1e-3]
    figures.update(
        lower=solution.lower,
        upper=solution.upper,
        relative_gap=_relative_gap(solution),
        seconds_to_relative_gap_1e3=round(solution.trace[closed[0]].seconds, 3) if closed else None,
        trials_to_relative_gap_1e3=closed[0] if closed else None,
        seconds=round(solution.seconds, 3),
        cpu_seconds=round(cpu_seconds, 3),
        wall_seconds=round(wall_seconds, 3),
        trials=len(solution.trace) - 1,
        alpha_vectors=solution.trace[-1].alpha_vectors,
        upper_points=solution.trace[-1].upper_points,
        peak_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    horizon = rollout_horizon(pomdp)
    if horizon * episodes <= max_rollout_steps:
        estimate = rollout_value(pomdp, solution.action, episodes=episodes, seed=0)
        figures.update(
            rollout_mean=estimate.mean,
            rollout_standard_error=estimate.standard_error,
            rollout_episodes=estimate.episodes,
            rollout_horizon=estimate.horizon,
            rollout_minus_lower=estimate.mean - solution.lower,  # beside the standard error, which can be 0
        )
    else:
        figures["rollout"] = f"skipped: {episodes} episodes of {horizon} steps exceed --max-rollout-steps"
    return figures


def sarsop_figures(path: pathlib.Path) -> dict | None:
    """SARSOP's committed 30 s figures for this file (testdata/sarsop_collection_30s.json), if its md5 matches."""
    reference = json.loads(SARSOP_COLLECTION.read_text())["files"].get(path.name)
    if reference is None or reference["md5"] != hashlib.md5(path.read_bytes()).hexdigest():
        return None
    return reference


def _solve_in_child(solve, arguments, results) -> None:
    results.put(solve(*arguments))


def _in_child(solve, arguments) -> dict:
    """`solve(*arguments)` in a forked process of its own, so that its peak memory is its own."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_solve_in_child, args=(solve, arguments, results))
    child.start()
    figures = results.get()
    child.join()
    return figures


def _collection(folder: pathlib.Path, budget: float, episodes: int, max_rollout_steps: int) -> dict:
    paths = sorted(path for path in folder.iterdir() if path.suffix.lower() == ".pomdp")
    if not paths:
        raise SystemExit(f"--collection {folder}: no .POMDP files there; rl/envs/README.md says how to fetch them")
    files = {}
    for path in paths:
        print(f"{path.name} ...", file=sys.stderr, flush=True)
        figures = _in_child(_solve_collection_file, (path, budget, episodes, max_rollout_steps))
        reference = sarsop_figures(path)
        if reference is not None and "lower" in figures:
            figures.update(
                sarsop_lower=reference["lower"],
                sarsop_upper=reference["upper"],
                lower_below_sarsop=reference["lower"] - figures["lower"],
                # none where SARSOP's lower bound is 0 (concert, ejs5-7: both solvers close at 0)
                lower_below_sarsop_percent=(
                    100 * (reference["lower"] - figures["lower"]) / abs(reference["lower"])
                    if reference["lower"]
                    else None
                ),
            )
        files[path.name] = figures
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", "--budget", dest="budget", type=float, default=60.0, help="seconds per file")
    parser.add_argument("--episodes", type=int, help="rollout episodes per file (default 1000; 100 for a collection)")
    parser.add_argument("--files", nargs="*", default=list(SARSOP_60S), choices=list(SARSOP_60S))
    parser.add_argument("--collection", type=pathlib.Path, help="a folder of .POMDP files to run instead of --files")
    parser.add_argument("--max-rollout-steps", type=int, default=200_000, help="collection: episodes x horizon cap")
    arguments = parser.parse_args()
    load = os.getloadavg()[0]
    if arguments.collection is not None:
        folder = pathlib.Path(os.environ.get("BUILD_WORKING_DIRECTORY", ".")) / arguments.collection
        files = _collection(folder, arguments.budget, arguments.episodes or 100, arguments.max_rollout_steps)
    else:
        files = {
            name: _in_child(_solve, (name, arguments.budget, arguments.episodes or 1000)) for name in arguments.files
        }
    lines = [f"  {json.dumps(name)}: {json.dumps(figures)}" for name, figures in files.items()]
    rest = json.dumps({"budget_seconds": arguments.budget, **run_info(load)})[1:-1]
    print('{"files": {\n' + ",\n".join(lines) + "\n}, " + rest + "}")  # one line per file


if __name__ == "__main__":
    main()
