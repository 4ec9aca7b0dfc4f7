"""Checkpoint schedules of the direct runner (no Ray)."""

import pytest

from rl.harness.training import runners


def due(schedule, last=40):
    return [iteration for iteration in range(last + 1) if schedule(iteration)]


def test_log_spaced_schedules_are_the_rounded_powers_of_their_base():
    assert due(runners.LogSpaced(2.0), 70) == [1, 2, 4, 8, 16, 32, 64]
    # round(1.5**k) for k = 0..9: 1, 2 (1.5), 2, 3, 5, 8, 11, 17, 26, 38
    assert due(runners.LogSpaced(1.5)) == [1, 2, 3, 5, 8, 11, 17, 26, 38]


def test_every_n_iterations():
    assert due(runners.Every(10)) == [10, 20, 30, 40]
    assert due(runners.Every(1), 3) == [1, 2, 3]  # never iteration 0: that is checkpoint_initial's


@pytest.mark.parametrize("make", [lambda: runners.LogSpaced(1.0), lambda: runners.LogSpaced(0.5)])
def test_a_log_spaced_base_must_exceed_one(make):
    with pytest.raises(ValueError, match="base > 1"):
        make()


@pytest.mark.parametrize("iterations", [0, -2, 2.5])
def test_every_needs_a_positive_integer(iterations):
    with pytest.raises(ValueError, match="integer N >= 1"):
        runners.Every(iterations)


def test_run_direct_takes_one_schedule():
    # Rejected before the context or config is touched, so None stands in for both.
    with pytest.raises(ValueError, match="checkpoint_every or checkpoint_at, not both"):
        runners.run_direct(
            None,
            None,
            stop=runners.StopRule(training_iterations=1),
            checkpoint_every=5,
            checkpoint_at=runners.LogSpaced(2.0),
        )
    with pytest.raises(ValueError, match="integer N >= 1"):
        runners.run_direct(None, None, stop=runners.StopRule(training_iterations=1), checkpoint_every=0)
