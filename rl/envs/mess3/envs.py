"""Mess3 as RL environments, and their Gymnasium ids.

    env = mess3_env("control")                            # occupancy control on Mess3 dynamics
    env = gymnasium.make("rl/Mess3Control-v0")             # the same, registered on import of rl.envs.mess3
    env = gymnasium.make("rl/Mess3NextToken-v0", observation=("tokens", "belief"))

Registered ids: rl/Mess3Control-v0 ("control"), rl/Mess3NextToken-v0 ("next_token"),
rl/Mess3StateGuess-v0 ("state_guess"); keyword arguments of gymnasium.make go to mess3_env.
"""

from __future__ import annotations

import gymnasium

from rl.envs.hmm.env import HMMEnv
from rl.envs.hmm.tasks import NextTokenPrediction, OccupancyControl, StateGuess
from rl.envs.mess3.process import mess3_process

TASKS = ("control", "next_token", "state_guess")

ENV_IDS = {
    "rl/Mess3Control-v0": "control",
    "rl/Mess3NextToken-v0": "next_token",
    "rl/Mess3StateGuess-v0": "state_guess",
}


# Defaults of the control task, chosen with solvers.control_references (README "solvers.hmm_control",
# sweep table): with tilt 3 and KL coefficient 4 the tilt pays only where the belief puts enough
# mass on the target, so the best memoryless policy (on last token and previous action) and the
# best open-loop action are both "never tilt" (passive), while the belief-optimal policy earns
# 3.510 vs 3.329 in gamma-0.9 value and 30.6 vs 21.3 per 64-step episode: all of the gap between
# passive and belief-optimal needs memory. (Tilt 2, KL 1, the earlier defaults, left 0.0013.)
CONTROL_DEFAULTS = {"target_state": 0, "tilt_strength": 3.0, "kl_coefficient": 4.0}


def mess3_env(
    task: str = "control",
    *,
    x: float = 0.05,
    a: float = 0.85,
    episode_length: int = 128,
    observation: tuple[str, ...] = ("tokens",),
    history_length: int = 1,
    target_state: int | None = None,
    tilt_strength: float | None = None,
    kl_coefficient: float | None = None,
) -> HMMEnv:
    """An HMMEnv on Mess3(x, a) with one of TASKS.

    The control task's arguments (target_state, tilt_strength, kl_coefficient; defaults in
    CONTROL_DEFAULTS, meaning in rl.envs.hmm.tasks.occupancy_control) are rejected for the
    passive tasks rather than ignored.
    """
    model = mess3_process(x=x, a=a)
    given = {"target_state": target_state, "tilt_strength": tilt_strength, "kl_coefficient": kl_coefficient}
    given = {name: value for name, value in given.items() if value is not None}
    if task == "control":
        chosen = OccupancyControl(model, **{**CONTROL_DEFAULTS, **given})
    elif task in ("next_token", "state_guess"):
        if given:
            raise ValueError(f"{sorted(given)} only apply to task='control'; task={task!r} is passive")
        chosen = NextTokenPrediction(model) if task == "next_token" else StateGuess(model)
    else:
        raise ValueError(f"task={task!r}; expected one of {TASKS}")
    return HMMEnv(chosen, episode_length=episode_length, observation=observation, history_length=history_length)


def register_envs() -> None:
    """Registers ENV_IDS with Gymnasium; calling it again is harmless."""
    for env_id, task in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=mess3_env, kwargs={"task": task})
