"""Does a trained Mess3 agent act on more than what it sees now? Greedy episodes of runs' last checkpoints.

    ./bazelw run //experiments/mess3:memory_use -- <run-id> [<run-id> ...] [--episodes 2048]

For each run: its last checkpoint plays `--episodes` fresh episodes with greedy actions (the same
episode seeds for every run, so runs are compared on the same draws), scored as in
control_scores (normalised gamma-0.9 value and episode return) plus `memory_use`: the share of
steps whose action the current observation does not fix, and how much surer of the target state
the agent is where it tilts than where it does not, at the same observation. Prints one JSON
line per run; writes nothing into the runs' folders.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

from experiments.mess3.task import control_scores

HERE = pathlib.Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_ids", nargs="+")
    parser.add_argument("--episodes", type=int, default=2048)
    parser.add_argument("--results-dir", default=str(HERE / "results"))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for run_id in args.run_ids:
        found, module = control_scores.final_policy(run_id, [args.results_dir])
        scores = control_scores.evaluate(
            module, num_episodes=args.episodes, seed=np.random.SeedSequence(0), stochastic=False
        )
        print(
            json.dumps(
                {
                    "run_id": run_id,
                    "recipe": found.run.manifest.experiment.module,
                    "checkpoint": found.checkpoints[-1].name,
                    "tilt_fraction": round(scores["tilt_fraction"], 4),
                    "memory_use": {k: round(v, 4) for k, v in scores["memory_use"].items()},
                    "normalised_value": round(scores["normalised_value"]["mean"], 3),
                    "normalised_episode_return": round(scores["normalised_episode_return"]["mean"], 3),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
