"""Does pipelined PPO learn as reward_only does? The pipelined study against the committed critic study.

    ./bazelw run //experiments/mess3:pipelined_study -- --max-concurrent 1      # ~50 min of 2 cores: its study id
    ./bazelw run //experiments/mess3:pipelined_check -- --study <study-id>      # prints one JSON object

The reference is the critic study's reward_only members (REFERENCE_STUDY, committed under
experiments/mess3/results; seeds 0-9 at the same budget, sequential PPO). The check passes when
- the final greedy value's 95 % t interval over the pipelined seeds overlaps the reference's, and
- the pipelined seeds' mean learning curve lies inside the reference seeds' 5-95 % band at
  >= CURVE_INSIDE of the iterations both record (the recorded curves' points).
It also reports the paired differences (same seeds) and each pipelined seed's share inside the band.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

from rl.harness import env_vars
from rl.harness.run import layout, metric_keys
from rl.harness.study import statistics, study_folder

REFERENCE_STUDY = "20261205T141746Z-398cbb"
REFERENCE_AGENT = "reward_only"
PIPELINED_AGENT = "reward_only[training/pipelined=True]"
SCORE = "normalised value (greedy)"
CURVE_INSIDE = 0.9  # the share of iterations the mean curve must keep inside the band
BAND = (5, 95)  # percentiles over the reference seeds at each iteration


def _study_agent(results_root: pathlib.Path, study_id: str, agent: str) -> dict:
    summary = study_folder(results_root, study_id, smoke=False) / "summary.json"
    agents = json.loads(summary.read_text())["agents"]
    if agent not in agents:
        raise SystemExit(
            f"study {study_id} has no agent {agent!r} (it has {sorted(agents)}): pass the pipelined study's id"
        )
    return agents[agent]


def _curve(results_root: pathlib.Path, run_id: str) -> dict[int, float]:
    folder = layout.RunLayout.find(results_root, run_id)
    if folder is None:
        raise SystemExit(
            f"run {run_id} is not under {results_root}: fetch it (`rl-harness fetch {run_id}`) or pass --results-dir"
        )
    points = json.loads((folder / "summary.json").read_text())["metrics"][metric_keys.RETURN]["curve"]
    return {int(x): float(y) for x, y in points if y is not None}


def compare(results_root: pathlib.Path, study_id: str) -> dict:
    """The check's figures (module docstring)."""
    reference = _study_agent(results_root, REFERENCE_STUDY, REFERENCE_AGENT)
    pipelined = _study_agent(results_root, study_id, PIPELINED_AGENT)
    ours, theirs = pipelined["scores"][SCORE], reference["scores"][SCORE]
    overlap = ours["low"] <= theirs["high"] and theirs["low"] <= ours["high"]
    paired = statistics.paired_difference(
        {int(s): v for s, v in ours["values"].items()}, {int(s): v for s, v in theirs["values"].items()}
    )
    reference_curves = [_curve(results_root, run_id) for run_id in reference["runs"].values()]
    pipelined_curves = {seed: _curve(results_root, run_id) for seed, run_id in pipelined["runs"].items()}
    iterations = sorted(set.intersection(*(set(curve) for curve in [*reference_curves, *pipelined_curves.values()])))
    band = np.percentile([[curve[i] for i in iterations] for curve in reference_curves], BAND, axis=0)
    per_seed = {seed: np.array([curve[i] for i in iterations]) for seed, curve in pipelined_curves.items()}
    mean_curve = np.mean(list(per_seed.values()), axis=0)

    def inside(curve: np.ndarray) -> float:
        return float(np.mean((curve >= band[0]) & (curve <= band[1])))

    return {
        "reference": {"study": REFERENCE_STUDY, "agent": REFERENCE_AGENT, SCORE: theirs},
        "pipelined": {"study": study_id, "agent": PIPELINED_AGENT, SCORE: ours},
        "intervals_overlap": overlap,
        "paired_difference": paired,
        "curve": {
            "iterations": len(iterations),
            "band_percentiles": BAND,
            "mean_inside": inside(mean_curve),
            "each_seed_inside": {seed: round(inside(curve), 3) for seed, curve in sorted(per_seed.items())},
        },
        "passed": bool(overlap and inside(mean_curve) >= CURVE_INSIDE),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, help="the pipelined study's id (pipelined_study's output)")
    parser.add_argument(
        "--results-dir",
        type=pathlib.Path,
        default=pathlib.Path("experiments/mess3/results"),
        help="where both studies and their runs are recorded (relative: to where you typed the command)",
    )
    options = parser.parse_args(argv)
    result = compare(pathlib.Path(env_vars.working_directory()) / options.results_dir, options.study)
    print(json.dumps(result, indent=1, default=float))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
