"""POMDPEnv over the machine file: Gymnasium's checker, the file's rewards, exact beliefs, symbols."""

import pathlib

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl.envs.pomdp import POMDPEnv, load_pomdp

MACHINE = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "machine.POMDP"


@pytest.fixture(scope="module")
def machine():
    return load_pomdp(MACHINE)


@pytest.mark.parametrize("observation", POMDPEnv.OBSERVATION_MODES)
def test_check_env_passes(machine, observation):
    check_env(POMDPEnv(machine, observation=observation, episode_length=50), skip_render_check=True)


def test_symbols_rewards_and_beliefs_follow_the_file(machine):
    env = POMDPEnv(machine, observation="symbol", episode_length=200)
    assert env.observation_space.n == 17 and env.discount == 0.999
    symbol, info = env.reset(seed=1)
    assert symbol == 16 and info["state"] == 255  # 16: nothing observed yet; the file starts in 255
    belief = machine.start
    rewards = []
    for action in np.random.default_rng(1).choice(4, size=200, p=[0.7, 0.2, 0.05, 0.05]):
        state = info["state"]
        symbol, reward, terminated, truncated, info = env.step(action)
        assert symbol == info["observation"] and machine.observations[action, info["state"], symbol] > 0
        assert reward == machine.rewards[action, state, info["state"], symbol]
        belief = machine.belief_update(belief, action, symbol)
        np.testing.assert_allclose(info["belief"], belief, atol=1e-12)
        rewards.append(reward)
    assert truncated and not terminated
    assert 0.994013 in rewards  # operating the new machine pays the file's R: 0 : 255


def test_state_and_belief_modes(machine):
    env = POMDPEnv(machine, observation="state", episode_length=5)
    state, info = env.reset(seed=0)
    assert state == info["state"] == 255
    env = POMDPEnv(machine, observation="belief", episode_length=5)
    belief, _ = env.reset(seed=0)
    assert belief.dtype == np.float32 and belief[255] == 1.0


def test_bad_arguments(machine):
    with pytest.raises(ValueError, match="choose one of \\('symbol', 'belief', 'state'\\)"):
        POMDPEnv(machine, observation="marginals", episode_length=5)
    env = POMDPEnv(machine, episode_length=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action 4 is outside"):
        env.step(4)
