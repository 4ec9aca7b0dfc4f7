"""The point-based policy, rolled out in CassandraMachineEnv, earns the value the solver reports.

100 episodes of 3000 steps (about 20 s: tagged slow). Each episode's estimate is its discounted
return plus discount**3000 (0.05) times the solver's value at the final belief, which stands in
for the remaining infinite tail; since that value is a lower bound on the policy's own, the
stand-in can only bias the estimate down, by 0.05 times the gap checked here. The check is that
the mean lies within 4 standard errors of the solver's start value.
"""

import pathlib

import numpy as np

from rl.envs.cassandra_machine import CassandraMachineEnv
from rl.envs.pomdp import load_pomdp
from rl.envs.solvers import solve_point_based

MACHINE = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "machine.POMDP"
EPISODES = 100
HORIZON = 3000


def test_rollout_agrees_with_the_value():
    solution = solve_point_based(load_pomdp(MACHINE), seed=0)
    env = CassandraMachineEnv(observation="belief", episode_length=HORIZON)
    estimates = []
    for episode in range(EPISODES):
        _, info = env.reset(seed=episode)
        total, weight, truncated = 0.0, 1.0, False
        while not truncated:
            _, reward, _, truncated, info = env.step(solution.action(info["belief"]))
            total += weight * reward
            weight *= env.discount
        estimates.append(total + weight * solution.value(info["belief"]))
    mean = np.mean(estimates)
    standard_error = np.std(estimates, ddof=1) / np.sqrt(EPISODES)
    assert abs(mean - solution.start_value) < 4 * standard_error, (mean, standard_error, solution.start_value)
