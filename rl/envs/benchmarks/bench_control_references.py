"""Time of control_references on Mess3 control: `bazel run //rl/envs:bench_control_references` prints JSON.

At CONTROL_DEFAULTS over 64-step episodes, with gamma 0.9 (the PPO agent's discount) and gamma 1
(the episode return): the whole call and each reference, the best of REPEATS runs (the machine
is shared, so the best run is the least disturbed one), with the values and the grid used.
Target: seconds, not minutes.
"""

from __future__ import annotations

import json
import os
import time

from rl.envs.benchmarks.run_info import run_info
from rl.envs.mess3 import CONTROL_DEFAULTS, mess3_env
from rl.envs.solvers import control_references

REPEATS = 3
HORIZON = 64
REFERENCES = ("fully_observed", "belief_optimal", "memoryless", "open_loop", "passive")


def _best_run(gamma: float) -> dict:
    task = mess3_env("control", episode_length=HORIZON).task
    runs = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        references = control_references(task, horizon=HORIZON, gamma=gamma)
        runs.append((time.perf_counter() - start, references))
    seconds, references = min(runs, key=lambda run: run[0])
    return {
        "seconds": round(seconds, 3),
        "seconds_per_reference": {name: round(getattr(references, name).seconds, 3) for name in REFERENCES},
        "value": {name: getattr(references, name).value for name in REFERENCES},
        "episode_return": {name: getattr(references, name).episode_return for name in REFERENCES},
        "belief_optimal_upper_bound": references.belief_optimal.upper_bound,
        "grid_resolution": references.belief_optimal.grid_resolution,
    }


def main() -> None:
    load = os.getloadavg()[0]
    figures = {f"gamma_{gamma:g}": _best_run(gamma) for gamma in (0.9, 1.0)}
    print(
        json.dumps(
            {
                "figures": figures,
                "setting": {"episode_length": HORIZON, **CONTROL_DEFAULTS},
                "method": f"best of {REPEATS} runs of control_references",
                **run_info(load),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
