"""Mess3 against the definition and numbers of the shared notes (section 2), and its Gymnasium ids."""

import gymnasium
import numpy as np
import pytest

from rl.envs import mess3
from rl.envs.mess3 import mess3_env, mess3_process, simplex_coordinates


@pytest.mark.parametrize("x, a", [(0.05, 0.85), (0.15, 0.6)])
def test_transition_matrices_follow_the_definition(x, a):
    y, b = 1 - 2 * x, (1 - a) / 2
    model = mess3_process(x=x, a=a)
    for k in range(3):
        for i in range(3):
            for j in range(3):
                expected = (y if i == j else x) * (a if k == j else b)
                assert model.transition_matrices[k, i, j] == pytest.approx(expected, abs=1e-15)


def test_defaults_are_shai_et_al():
    model = mess3_process()
    np.testing.assert_allclose(model.transition_matrices, mess3_process(x=0.05, a=0.85).transition_matrices)
    expected_chain = np.full((3, 3), 0.05) + np.eye(3) * 0.85  # 0.9 on the diagonal, 0.05 off it
    np.testing.assert_allclose(model.state_transition_matrix, expected_chain, atol=1e-15)
    np.testing.assert_allclose(model.stationary_distribution(), [1 / 3] * 3, atol=1e-12)


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="x=0.6; Mess3 needs 0 <= x <= 0.5"):
        mess3_process(x=0.6)
    with pytest.raises(ValueError, match="a=1.2"):
        mess3_process(a=1.2)


def test_simplex_coordinates():
    vertices = simplex_coordinates(np.eye(3))
    np.testing.assert_allclose(vertices, [[0, 0], [1, 0], [0.5, np.sqrt(3) / 2]], atol=1e-15)
    # x = p1 + p2 / 2, y = sqrt(3)/2 p2 for the belief after one token 0: (0.85, 0.075, 0.075)
    np.testing.assert_allclose(simplex_coordinates([0.85, 0.075, 0.075]), [0.1125, np.sqrt(3) / 2 * 0.075])
    with pytest.raises(ValueError, match="expected \\(..., 3\\)"):
        simplex_coordinates(np.ones(4) / 4)


def test_registered_ids():
    mess3.register_envs()  # a second registration is harmless
    for env_id, task in mess3.ENV_IDS.items():
        env = gymnasium.make(env_id, episode_length=5)
        observation, _info = env.reset(seed=0)
        assert env.observation_space.contains(observation)
        assert env.unwrapped.task.model.num_states == 3
        expected_actions = 4 if task == "control" else 3
        assert env.action_space.n == expected_actions
    assert {"rl/Mess3Control-v0", "rl/Mess3NextToken-v0", "rl/Mess3StateGuess-v0"} <= set(gymnasium.registry)


def test_control_arguments_are_rejected_for_passive_tasks():
    with pytest.raises(ValueError, match="\\['kl_coefficient'\\] only apply to task='control'"):
        mess3_env("next_token", kl_coefficient=0.5)
    with pytest.raises(ValueError, match="task='predict'"):
        mess3_env("predict")
    assert mess3_env("control", kl_coefficient=0.5).task.kl_coefficient == 0.5
