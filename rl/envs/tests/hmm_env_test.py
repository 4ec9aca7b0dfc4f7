"""HMMEnv with every task and observation option: Gymnasium's checker, observations, rewards, beliefs."""

import itertools
import math

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl.envs.hmm import OBSERVATION_PARTS, HMMEnv, belief_after
from rl.envs.hmm.tasks import NextTokenPrediction, OccupancyControl, StateGuess
from rl.envs.mess3 import mess3_process

MODEL = mess3_process()
TASKS = {
    "next_token": lambda: NextTokenPrediction(MODEL),
    "state_guess": lambda: StateGuess(MODEL),
    "control": lambda: OccupancyControl(MODEL, target_state=0, tilt_strength=2.0, kl_coefficient=1.0),
}
OBSERVATIONS = [(part,) for part in OBSERVATION_PARTS] + [OBSERVATION_PARTS]


@pytest.mark.parametrize("task, observation", list(itertools.product(TASKS, OBSERVATIONS)))
def test_check_env_passes(task, observation):
    env = HMMEnv(TASKS[task](), episode_length=20, observation=observation, history_length=3)
    check_env(env, skip_render_check=True)


def _run(env, actions, seed):
    observation, info = env.reset(seed=seed)
    steps = [(observation, 0.0, False, info)]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        assert not terminated
        steps.append((observation, reward, truncated, info))
    return steps


def test_seeded_episodes_repeat_and_truncate():
    env = HMMEnv(TASKS["control"](), episode_length=7, observation=OBSERVATION_PARTS, history_length=2)
    first, second = _run(env, [1, 0, 2, 3, 0, 1, 2], seed=3), _run(env, [1, 0, 2, 3, 0, 1, 2], seed=3)
    for (obs_a, reward_a, _, info_a), (obs_b, reward_b, _, info_b) in zip(first, second):
        np.testing.assert_array_equal(obs_a, obs_b)
        assert reward_a == reward_b and info_a["state"] == info_b["state"]
    assert [truncated for _, _, truncated, _ in first[1:]] == [False] * 6 + [True]


def test_observation_parts_and_info():
    env = HMMEnv(TASKS["next_token"](), episode_length=50, observation=OBSERVATION_PARTS, history_length=2)
    steps = _run(env, [0, 1, 2, 0], seed=1)
    slices = env.observation_slices
    assert [slices[part].stop - slices[part].start for part in OBSERVATION_PARTS] == [6, 3, 3, 3]
    observation, _, _, info = steps[0]
    assert not observation[slices["tokens"]].any() and not observation[slices["previous_action"]].any()
    np.testing.assert_allclose(info["belief"], [1 / 3] * 3)
    tokens = [info["token"] for _, _, _, info in steps[1:]]
    observation, _, _, info = steps[-1]
    np.testing.assert_array_equal(observation[slices["tokens"]], np.eye(3)[tokens[-2:]].ravel())  # oldest first
    np.testing.assert_array_equal(observation[slices["previous_action"]], [1, 0, 0])
    np.testing.assert_array_equal(observation[slices["state"]], np.eye(3)[info["state"]])
    np.testing.assert_allclose(info["belief"], belief_after(MODEL, tokens), rtol=1e-12)
    np.testing.assert_allclose(observation[slices["belief"]], info["belief"], rtol=1e-6)
    assert observation[slices["tokens"]][:3].sum() == 1  # two tokens seen: both slots filled


def test_passive_rewards():
    env = HMMEnv(TASKS["next_token"](), episode_length=100)
    for _, reward, _, info in _run(env, [0] * 100, seed=0)[1:]:
        assert reward == float(info["token"] == 0) == info["reward_components"]["correct"]
    env = HMMEnv(TASKS["state_guess"](), episode_length=100)
    states = [info["state"] for _, _, _, info in _run(env, [2] * 100, seed=0)]
    for state_before, (_, reward, _, _) in zip(states, _run(env, [2] * 100, seed=0)[1:]):
        assert reward == float(state_before == 2)  # the guess is about the state the step starts in


def test_occupancy_control_reward_and_kl():
    task = TASKS["control"]()
    # tilting toward state 0 from state 1 reweights Mess3's row (0.05, 0.9, 0.05) by (e^2, 1, 1)
    weights = np.array([0.05 * math.e**2, 0.9, 0.05])
    tilted = weights / weights.sum()
    expected_kl = float(np.sum(tilted * np.log(tilted / [0.05, 0.9, 0.05])))  # emissions cancel
    assert task.kl[1, 1] == pytest.approx(expected_kl, rel=1e-12)
    np.testing.assert_allclose(task.kl[0], 0.0, atol=1e-12)  # action 0 is passive
    np.testing.assert_allclose(task.dynamics[1].state_transition_matrix[1], tilted)
    env = HMMEnv(task, episode_length=200)
    states = [info["state"] for _, _, _, info in _run(env, [1] * 200, seed=5)]
    for state_before, (_, reward, _, info) in zip(states, _run(env, [1] * 200, seed=5)[1:]):
        components = info["reward_components"]
        assert components["occupancy"] == float(info["state"] == 0)
        assert components["kl"] == task.kl[1, state_before]
        assert reward == pytest.approx(components["occupancy"] - 1.0 * components["kl"])


def test_controlled_belief_uses_the_tilted_dynamics():
    task = TASKS["control"]()
    env = HMMEnv(task, episode_length=30)
    steps = _run(env, [1] * 30, seed=2)
    tokens = [info["token"] for _, _, _, info in steps[1:]]
    np.testing.assert_allclose(steps[-1][3]["belief"], belief_after(task.dynamics[1], tokens), rtol=1e-12)


def test_bad_configuration_is_an_error():
    with pytest.raises(ValueError, match="choose distinct parts from"):
        HMMEnv(TASKS["next_token"](), episode_length=5, observation=("tokens", "pixels"))
    with pytest.raises(ValueError, match="episode_length=0"):
        HMMEnv(TASKS["next_token"](), episode_length=0)
    with pytest.raises(ValueError, match="prior: row \\(the vector\\) sums to 0.5"):
        HMMEnv(TASKS["next_token"](), episode_length=5, prior=[0.5, 0.0, 0.0])
    with pytest.raises(ValueError, match="target_state=3"):
        OccupancyControl(MODEL, target_state=3, tilt_strength=1.0, kl_coefficient=1.0)
    with pytest.raises(ValueError, match="target_state=1.5; expected an integer state"):
        OccupancyControl(MODEL, target_state=1.5, tilt_strength=1.0, kl_coefficient=1.0)
    with pytest.raises(ValueError, match="kl_coefficient=nan"):
        OccupancyControl(MODEL, target_state=0, tilt_strength=1.0, kl_coefficient=float("nan"))
    with pytest.raises(ValueError, match="kl_coefficient=-0.5"):
        OccupancyControl(MODEL, target_state=0, tilt_strength=1.0, kl_coefficient=-0.5)
    with pytest.raises(ValueError, match="tilt_strength=inf"):
        OccupancyControl(MODEL, target_state=0, tilt_strength=float("inf"), kl_coefficient=1.0)
    env = HMMEnv(TASKS["next_token"](), episode_length=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action 3 is outside"):
        env.step(3)
