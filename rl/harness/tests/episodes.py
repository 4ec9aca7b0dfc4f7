"""Comparing RLlib episodes in tests: the same data step by step, whatever their form (lists or numpy)."""

import copy

import numpy as np


def assert_equal_nests(expected, actual, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(expected) == sorted(actual), where
        for key in expected:
            assert_equal_nests(expected[key], actual[key], f"{where}/{key}")
    else:
        expected, actual = np.asarray(expected), np.asarray(actual)
        assert expected.dtype == actual.dtype and expected.shape == actual.shape, where
        np.testing.assert_array_equal(actual, expected, err_msg=where)


def assert_same_episodes(expected: list, actual: list) -> None:
    """Each episode's steps (observations, infos, actions, rewards, model outputs), flags and start: equal."""
    assert [len(episode) for episode in expected] == [len(episode) for episode in actual]
    for index, (rllib, fast) in enumerate(zip(expected, actual)):
        where = f"episode {index}"
        assert rllib.t_started == fast.t_started, where
        for step, (want, got) in enumerate(zip(rllib.get_infos(), fast.get_infos(), strict=True)):
            assert_equal_nests(want, got, f"{where} infos {step}")
        assert_equal_nests(rllib.get_observations(), fast.get_observations(), f"{where} observations")
        assert_equal_nests(rllib.get_actions(), fast.get_actions(), f"{where} actions")
        assert_equal_nests(rllib.get_rewards(), fast.get_rewards(), f"{where} rewards")
        assert sorted(rllib.extra_model_outputs) == sorted(fast.extra_model_outputs), where
        for key in rllib.extra_model_outputs:
            assert_equal_nests(rllib.get_extra_model_outputs(key), fast.get_extra_model_outputs(key), f"{where} {key}")
        assert (rllib.is_terminated, rllib.is_truncated) == (fast.is_terminated, fast.is_truncated), where


def numpy_copies(episodes: list) -> list:
    """Numpy copies of `episodes` (list episodes hold per-step nests that compare only once stacked)."""
    return [episode if episode.is_numpy else copy.deepcopy(episode).to_numpy() for episode in episodes]
