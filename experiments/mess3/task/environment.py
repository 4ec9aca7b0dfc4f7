"""The controlled Mess3 environment of the task, registered with RLlib as ENV_NAME.

    from experiments.mess3.task.environment import ENV_NAME, make_env

A module of its own, importing only the env's package: RLlib's registry pickles `make_env` by
reference, so every remote EnvRunner imports this module, and through controlled_mess3 it would
import the analysis stack too (rl.analysis, matplotlib: ~82 MiB of resident memory a runner,
measured in docs/performance.md). controlled_mess3 re-exports all of it.
"""

from __future__ import annotations

import gymnasium
from ray.tune.registry import register_env

from rl.envs.mess3 import CONTROL_DEFAULTS, mess3_env

X, A = 0.05, 0.85
# The agent sees the last token and its own previous action: the action changes the dynamics
# the belief is filtered with, so without it the belief would not be a function of the inputs.
ENV_KWARGS = {
    "x": X,
    "a": A,
    "episode_length": 64,
    "observation": ("tokens", "previous_action"),
    "history_length": 1,
    **CONTROL_DEFAULTS,
}
ENV_NAME = "experiments.mess3/controlled_mess3"


def make_env(env_config=None) -> gymnasium.Env:
    """The controlled Mess3 env of this task; `env_config` (RLlib's EnvContext) may change only its observation.

    The dynamics and rewards stay ENV_KWARGS' so that every run is scored on the same references.
    """
    changed = dict(env_config or {})
    if set(changed) - {"observation"}:
        raise ValueError(
            f"env_config keys {sorted(set(changed) - {'observation'})}: only 'observation' may differ "
            "between this task's runs (the references are those of ENV_KWARGS)"
        )
    return mess3_env("control", **{**ENV_KWARGS, **changed})


register_env(ENV_NAME, make_env)
