"""Cassandra's machine-maintenance POMDP: the factored model and its env (see README.md).

from rl.envs.cassandra_machine import CassandraMachineEnv, machine_pomdp, component_marginals
env = gymnasium.make("rl/CassandraMachine-v0", observation="marginals")   # registered on import
"""

from rl.envs.cassandra_machine.env import ENV_ID, CassandraMachineEnv, register_envs
from rl.envs.cassandra_machine.model import component_marginals, machine_pomdp, predict_belief

register_envs()

__all__ = ["ENV_ID", "CassandraMachineEnv", "component_marginals", "machine_pomdp", "predict_belief", "register_envs"]
