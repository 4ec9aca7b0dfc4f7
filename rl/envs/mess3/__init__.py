"""Mess3: the process, belief-simplex coordinates and registered RL environments.

from rl.envs.mess3 import mess3_process, mess3_env, simplex_coordinates
env = gymnasium.make("rl/Mess3Control-v0")   # ids are registered when this package is imported
"""

from rl.envs.mess3.envs import CONTROL_DEFAULTS, ENV_IDS, TASKS, mess3_env, register_envs
from rl.envs.mess3.process import mess3_process, simplex_coordinates

register_envs()

__all__ = ["CONTROL_DEFAULTS", "ENV_IDS", "TASKS", "mess3_env", "mess3_process", "register_envs", "simplex_coordinates"]
