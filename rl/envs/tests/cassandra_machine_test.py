"""The factored machine model against machine.POMDP and the shared notes (section 1), and its env."""

import math
import pathlib

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl.envs.cassandra_machine import CassandraMachineEnv, component_marginals, machine_pomdp, predict_belief
from rl.envs.pomdp import load_pomdp

MACHINE = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "machine.POMDP"
ARRAYS = ("transitions", "observations", "rewards", "expected_rewards", "start")


@pytest.fixture(scope="module")
def from_file():
    return load_pomdp(MACHINE)


def test_equals_the_file_in_every_array(from_file):
    built = machine_pomdp()
    assert built.discount == from_file.discount == 0.999
    for name in ARRAYS:
        np.testing.assert_allclose(getattr(built, name), getattr(from_file, name), rtol=0, atol=1e-9, err_msg=name)


def test_exact_model_is_the_file_before_rounding(from_file):
    exact = machine_pomdp(decimals=None)
    half_of_the_last_decimal = 0.5e-6 + 1e-12  # 6 printed decimals, plus floating-point slack
    for name in ("transitions", "observations", "rewards"):
        np.testing.assert_allclose(
            getattr(exact, name), getattr(from_file, name), rtol=0, atol=half_of_the_last_decimal, err_msg=name
        )
    np.testing.assert_allclose(exact.transitions.sum(axis=2), 1.0, atol=1e-12)
    np.testing.assert_allclose(exact.observations.sum(axis=2), 1.0, atol=1e-12)


def test_facts_of_the_notes():
    exact = machine_pomdp(decimals=None)
    assert exact.transitions[0, 255, 255] == pytest.approx(0.97**4)  # four good components each stay good
    assert exact.transitions[3, 0, 255] == 1.0 and exact.transitions[1, 77, 77] == 1.0
    assert exact.expected_rewards[0, 255] == pytest.approx(0.994013, abs=5e-7)  # f(good)**4
    assert exact.expected_rewards[0, 254] == pytest.approx(0.944 * 0.9985**3)  # component 0 fair
    assert exact.expected_rewards[0, 0] == 0.0
    np.testing.assert_allclose(exact.expected_rewards[1:, 100], [-1, -3, -15])
    # operate: symbol 15 with probability prod g(c'), g = [0, .75, .95, 1]; state 253 has component 0 bad
    np.testing.assert_allclose(exact.observations[0, 253, [15, 0]], [0.75, 0.25])
    # inspect: bit k set with probability q(c_k), q = [.02, .05, .80, .97]; state 170 is all fair
    assert exact.observations[1, 170, 0] == pytest.approx(0.2**4)
    assert exact.observations[1, 170, 0b0001] == pytest.approx(0.8 * 0.2**3)
    assert exact.observations[1, 3, 0b0001] == pytest.approx(0.97 * 0.98**3)  # component 0 good, others broken
    np.testing.assert_array_equal(exact.observations[2:, :, 0], 1.0)


def test_factored_prediction_and_marginals():
    exact = machine_pomdp(decimals=None)
    beliefs = np.random.default_rng(0).dirichlet(np.ones(256), size=8)
    for action in range(4):
        np.testing.assert_allclose(predict_belief(beliefs, action), beliefs @ exact.transitions[action], atol=1e-15)
        single = beliefs[0]
        np.testing.assert_allclose(predict_belief(single, action), single @ exact.transitions[action], atol=1e-15)
    marginals = component_marginals(beliefs)
    assert marginals.shape == (8, 4, 4)
    for state in range(256):
        for component in range(4):
            condition = state // 4**component % 4
            marginals[:, component, condition] -= beliefs[:, state]
    np.testing.assert_allclose(marginals, 0.0, atol=1e-15)


def test_marginals_lose_correlations():
    # After operate and symbol 0 from all-good, at least one component wore: the components'
    # conditions are dependent, so the product of the marginals is not the belief. By the notes,
    # k of the 4 good components wear to fair with probability C(4, k) 0.03^k 0.97^(4-k), and
    # symbol 0 then has probability 1 - 0.95^k (symbol 15 needs every g(c') to pass).
    worn = np.arange(5)
    posterior = np.array([math.comb(4, k) for k in worn]) * 0.03**worn * 0.97 ** (4 - worn) * (1 - 0.95**worn)
    posterior /= posterior.sum()
    fair = (posterior * worn).sum() / 4  # each component is equally likely to be one of the worn ones
    exact = machine_pomdp(decimals=None)
    belief = exact.belief_update(exact.start, 0, 0)
    marginals = component_marginals(belief)
    np.testing.assert_allclose(marginals, [[0.0, 0.0, fair, 1 - fair]] * 4, atol=1e-12)
    assert round(fair, 3) == 0.272 and round(posterior[1], 3) == 0.915  # the numbers quoted in README.md
    product = np.einsum("a,b,c,d->dcba", *marginals).ravel()  # component 3 is the most significant digit
    assert belief[255] == 0.0 and product[255] == pytest.approx((1 - fair) ** 4) and round(product[255], 3) == 0.281


@pytest.mark.parametrize("observation", CassandraMachineEnv.OBSERVATION_MODES)
def test_check_env_passes(observation):
    check_env(CassandraMachineEnv(observation=observation, episode_length=50), skip_render_check=True)


def test_env_belief_reward_and_observations():
    env = CassandraMachineEnv(observation="marginals", episode_length=300)
    exact = env.pomdp
    observation, info = env.reset(seed=4)
    assert info["state"] == 255 and info["observation"] == 16
    belief = exact.start
    actions = np.random.default_rng(4).choice(4, size=300, p=[0.7, 0.2, 0.05, 0.05])
    for action in actions:
        state = info["state"]
        observation, reward, terminated, truncated, info = env.step(action)
        assert reward == exact.rewards[action, state, info["state"], info["observation"]]
        belief = exact.belief_update(belief, action, info["observation"])
        np.testing.assert_allclose(info["belief"], belief, atol=1e-12)
        np.testing.assert_allclose(observation, component_marginals(belief), atol=1e-6)
    assert truncated and not terminated
    assert env.discount == 0.999


def test_registered_id():
    env = gymnasium.make("rl/CassandraMachine-v0", observation="belief", episode_length=3)
    observation, _ = env.reset(seed=0)
    assert observation.shape == (256,) and observation[255] == 1.0
