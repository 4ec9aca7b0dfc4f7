"""The progress line of the lifecycle's runners: budget share, speed, ETA and a consistent empty return."""

from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, ITERATION_SECONDS, RETURN
from rl.harness.training import lifecycle, runners


def _row(**values):
    return {ITERATION: 3, ENV_STEPS: 3072, ITERATION_SECONDS: 1.5, "time_total_s": 4.0, **values}


def test_the_line_shows_the_budget_share_speed_and_eta():
    line = lifecycle.progress_line(_row(**{RETURN: 12.345}), runners.StopRule(env_steps=4096))
    # 3072 of 4096 env steps in 4 s: 75 %, 768 env steps/s, 4 s x 0.25 / 0.75 = 1.3 s to go
    assert line == "iter 3 | 75% | ETA 1 s | env steps 3072 | return 12.35 | 768 env steps/s | 1.5 s/iter | 4 s total"


def test_the_nearest_bound_sets_the_share():
    stop = runners.StopRule(training_iterations=4, env_steps=100_000)
    assert stop.progress(_row()) == 0.75 and "| 75% |" in lifecycle.progress_line(_row(), stop)


def test_no_finished_episode_and_a_nan_return_both_show_a_dash():
    assert "return - |" in lifecycle.progress_line(_row(**{RETURN: None}))
    assert "return - |" in lifecycle.progress_line(_row(**{RETURN: float("nan")}))
    assert "%" not in lifecycle.progress_line(_row())  # no stop rule given: no share, no ETA
