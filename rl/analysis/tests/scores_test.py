"""Normalised scores, discounted returns and intervals, against values worked out by hand."""

import numpy as np
import pytest

from rl.analysis.scores import (
    ScoreScale,
    discounted_returns,
    mean_interval,
    mean_interval_or_point,
    normalised_interval,
)

SCALE = ScoreScale(zero=20.0, one=30.0, zero_name="memoryless", one_name="belief-optimal")


def test_the_scale_sends_the_references_to_0_and_1():
    assert SCALE.normalise(20.0) == 0.0 and SCALE.normalise(30.0) == 1.0
    assert SCALE.normalise(27.5) == pytest.approx(0.75)
    assert SCALE.normalise(15.0) == pytest.approx(-0.5)  # worse than the zero policy: below 0, not clipped
    np.testing.assert_allclose(SCALE.normalise(np.array([25.0, 35.0])), [0.5, 1.5])


def test_a_scale_whose_references_coincide_is_refused():
    with pytest.raises(ValueError, match="'a' and 'b' both score 1.0"):
        ScoreScale(zero=1.0, one=1.0, zero_name="a", one_name="b")
    with pytest.raises(ValueError, match="must be finite"):
        ScoreScale(zero=float("nan"), one=1.0, zero_name="a", one_name="b")


def test_discounted_returns_stop_at_each_episode_end():
    rewards = np.array([[1.0, 1.0, 1.0], [2.0, 0.0, 4.0]])
    valid = np.array([[True, True, True], [True, True, False]])  # the second episode lasted 2 steps
    # 1 + 0.5 + 0.25 = 1.75; 2 + 0 (the 4 never happened) = 2.
    np.testing.assert_allclose(discounted_returns(rewards, valid, gamma=0.5), [1.75, 2.0])
    with pytest.raises(ValueError, match="gamma=0"):
        discounted_returns(rewards, valid, gamma=0.0)
    with pytest.raises(ValueError, match=r"must both be \(episodes, steps\)"):
        discounted_returns(rewards[0], valid[0], gamma=0.5)


def test_intervals_normal_and_student_t():
    # [1, 2, 3]: mean 2, sample sd 1, stderr 1/sqrt(3) = 0.57735; t(0.975, 2 dof) = 4.3027.
    t = mean_interval([1.0, 2.0, 3.0], spread="t")
    assert t["mean"] == 2.0 and t["stderr"] == pytest.approx(0.57735, abs=1e-5)
    assert t["high"] - t["mean"] == pytest.approx(4.3027 * 0.57735, abs=1e-3)
    normal = mean_interval([1.0, 2.0, 3.0])
    assert normal["high"] - normal["mean"] == pytest.approx(1.95996 * 0.57735, abs=1e-4)
    on_scale = normalised_interval(t, SCALE)  # (2 - 20) / 10 = -1.8; stderr / 10
    assert on_scale["mean"] == pytest.approx(-1.8) and on_scale["stderr"] == pytest.approx(0.057735, abs=1e-6)
    assert on_scale["low"] == pytest.approx((t["low"] - 20) / 10)
    with pytest.raises(ValueError, match="at least 2 values"):
        mean_interval([1.0])
    with pytest.raises(ValueError, match="spread='bootstrap'"):
        mean_interval([1.0, 2.0], spread="bootstrap")


def test_a_single_value_is_a_point_and_more_are_an_interval():
    assert mean_interval_or_point([2.5]) == {"mean": 2.5, "low": 2.5, "high": 2.5, "stderr": 0.0, "n": 1}
    assert mean_interval_or_point([1.0, 2.0, 3.0], spread="t") == mean_interval([1.0, 2.0, 3.0], spread="t")
