"""rl.envs: environments and reference solvers (numpy, scipy and gymnasium only; see AGENTS.md).

from rl.envs.hmm import FiniteHMM, HMMEnv, belief_after          # finite HMMs, belief filter, env
from rl.envs.mess3 import mess3_process, mess3_env                 # Mess3; rl/Mess3*-v0 ids
from rl.envs.pomdp import load_pomdp, FinitePOMDP, POMDPEnv        # Cassandra's .POMDP format
from rl.envs.cassandra_machine import CassandraMachineEnv          # machine maintenance; rl/CassandraMachine-v0
from rl.envs.solvers import solve_fully_observable, qmdp, solve_point_based
"""
