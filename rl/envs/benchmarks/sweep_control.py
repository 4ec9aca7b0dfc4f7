"""Mess3 control settings swept with control_references: `bazel run //rl/envs:sweep_control` prints JSON.

    bazel run //rl/envs:sweep_control                  # the grid below: one JSON object per setting, a line each
    bazel run //rl/envs:sweep_control -- --markdown    # the same as the Markdown table of rl/envs/README.md

Every setting (SETTINGS) is solved twice over 64-step episodes: with its gamma (0.9, what the
PPO agent of experiments/mess3 discounts by, unless the row varies it) and with gamma 1 (the
episode return RLlib reports, maximised). The memory gap ratio
(rl.envs.solvers.hmm_control.ControlReferences.memory_gap_ratio) is recorded on the discounted
value and on the episode return of the same discounted-optimal policies, and on the return of
the return-optimal policies, each with the belief-optimal gain over passivity per episode.
About 2 s a setting (up to 15 s where the grid must be fine).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rl.envs.hmm.tasks import OccupancyControl
from rl.envs.mess3 import CONTROL_DEFAULTS, mess3_process
from rl.envs.solvers import control_references

HORIZON = 64
TRAINING_GAMMA = 0.9  # experiments/mess3's PPO
# The 64-step return is about ten times the 0.9-discounted value, so its bracket may be wider
# than the default 1e-3 (some settings would need a grid finer than the default limit).
RETURN_TOLERANCE = 5e-3
DEFAULT_PROCESS = (0.05, 0.85)  # Shai et al.'s Mess3
RECOMMENDED = (3.0, 4.0)  # tilt strength, KL coefficient (rl/envs/README.md, "Control settings swept")
# (x, a, tilt strength, KL coefficient, gamma): tilt x KL on the default process; finer KL steps
# in the band where only a confident belief makes control pay at gamma 0.9; then the process and
# the discount varied around the recommended setting.
BAND = {2.0: (4.5, 4.75, 5.25, 5.5, 5.75), 2.5: (4.0, 4.5, 5.0), 3.0: (4.25, 4.5, 4.75), 3.5: (4.25,)}
SETTINGS = (
    [
        (*DEFAULT_PROCESS, tilt, kl, TRAINING_GAMMA)
        for tilt in (1.0, 2.0, 3.0, 4.0)
        for kl in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    ]
    + [(*DEFAULT_PROCESS, tilt, kl, TRAINING_GAMMA) for tilt, kls in BAND.items() for kl in kls]
    + [(x, a, *RECOMMENDED, TRAINING_GAMMA) for x, a in ((0.02, 0.85), (0.1, 0.85), (0.05, 0.7), (0.05, 0.95))]
    + [(*DEFAULT_PROCESS, *RECOMMENDED, gamma) for gamma in (0.8, 0.95, 0.99)]
)


def evaluate_setting(x: float, a: float, tilt_strength: float, kl_coefficient: float, gamma: float) -> dict:
    """The figures of one setting (see the module docstring)."""
    task = OccupancyControl(
        mess3_process(x=x, a=a),
        target_state=CONTROL_DEFAULTS["target_state"],
        tilt_strength=tilt_strength,
        kl_coefficient=kl_coefficient,
    )
    # Mess3's stationary distribution is uniform for every x > 0 (its chain is symmetric).
    uniform = np.full(3, 1.0 / 3.0)
    start = time.perf_counter()
    discounted = control_references(task, horizon=HORIZON, gamma=gamma, prior=uniform)
    undiscounted = control_references(task, horizon=HORIZON, gamma=1.0, prior=uniform, value_tolerance=RETURN_TOLERANCE)
    return {
        "x": x,
        "a": a,
        "tilt_strength": tilt_strength,
        "kl_coefficient": kl_coefficient,
        "gamma": gamma,
        "ratio_discounted_value": discounted.memory_gap_ratio("value"),
        "ratio_discounted_policies_episode_return": discounted.memory_gap_ratio("episode_return"),
        "ratio_episode_return": undiscounted.memory_gap_ratio("value"),
        "belief_optimal_gain_discounted_policies": discounted.belief_optimal.episode_return
        - discounted.passive.episode_return,
        "belief_optimal_gain_episode_return": undiscounted.belief_optimal.value - undiscounted.passive.value,
        "references": {
            f"gamma_{references.gamma:g}": {
                name: {
                    "value": getattr(references, name).value,
                    "episode_return": getattr(references, name).episode_return,
                }
                for name in ("fully_observed", "belief_optimal", "memoryless", "open_loop", "passive")
            }
            for references in (discounted, undiscounted)
        },
        "seconds": time.perf_counter() - start,
    }


def markdown(rows: list[dict]) -> str:
    """The README table: one line per setting."""
    lines = [
        (
            "| x | a | tilt | KL coef. | γ | ratio: value | ratio: episode return | gain: episode return "
            "| ratio, γ = 1 | gain, γ = 1 |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['x']:g} | {row['a']:g} | {row['tilt_strength']:g} | {row['kl_coefficient']:g} | {row['gamma']:g} "
            f"| {row['ratio_discounted_value']:.3f} | {row['ratio_discounted_policies_episode_return']:.3f} "
            f"| {row['belief_optimal_gain_discounted_policies']:.2f} "
            f"| {row['ratio_episode_return']:.3f} | {row['belief_optimal_gain_episode_return']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the README table instead of JSON lines")
    arguments = parser.parse_args()
    rows = []
    for setting in SETTINGS:
        rows.append(evaluate_setting(*setting))
        if not arguments.markdown:
            print(json.dumps(rows[-1]), flush=True)
    if arguments.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
