"""The example recipe's environment: belief observations on Mess3 occupancy control (no training here;
`./bazelw run //my_experiments/belief_control:ppo -- --smoke` runs the whole recipe)."""

import numpy as np

from my_experiments.belief_control import ppo


def test_the_observation_is_the_belief_over_the_three_hidden_states():
    env = ppo.make_env({})
    observation, _ = env.reset(seed=0)
    for _ in range(10):
        assert observation.shape == (3,) and (observation >= 0).all()
        np.testing.assert_allclose(observation.sum(), 1.0, atol=1e-6)  # a probability vector
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            break
