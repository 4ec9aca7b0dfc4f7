"""Finite POMDPs: the model, Cassandra's .POMDP file format and a Gymnasium env.

from rl.envs.pomdp import FinitePOMDP, POMDPEnv, load_pomdp
pomdp = load_pomdp("rl/envs/testdata/machine.POMDP")
env = POMDPEnv(pomdp, observation="belief", episode_length=1000)
"""

from rl.envs.pomdp.cassandra_format import PomdpFormatError, load_pomdp
from rl.envs.pomdp.env import POMDPEnv
from rl.envs.pomdp.model import FinitePOMDP

__all__ = ["FinitePOMDP", "POMDPEnv", "PomdpFormatError", "load_pomdp"]
