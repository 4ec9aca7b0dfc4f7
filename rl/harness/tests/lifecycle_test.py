"""The lifecycle's progress line (budget share, speed, ETA, the last return), its frozen long-lived objects, and
the stop of an algorithm whose run failed (RLlib's logs of its lost runners left out)."""

import contextlib
import gc
import logging
import pathlib
import re
import types
import weakref

import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env import env_runner_group
from ray.rllib.utils import actor_manager

from rl.harness.run.manifest import ResumeSource
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, ITERATION_SECONDS, RETURN
from rl.harness.run.rows import RowBudget
from rl.harness.run.status import COMPLETED
from rl.harness.tests import contexts
from rl.harness.training import lifecycle, runners


def _row(**values):
    return {ITERATION: 3, ENV_STEPS: 3072, ITERATION_SECONDS: 1.5, "time_total_s": 4.0, **values}


def test_the_line_shows_the_budget_share_speed_and_eta():
    line = lifecycle.ProgressLine(runners.StopRule(env_steps=4096)).of(_row(**{RETURN: 12.345}))
    # 3072 of 4096 env steps in 4 s: 75 %, 768 env steps/s, 4 s x 0.25 / 0.75 = 1.3 s to go
    assert line == "iter 3 | 75% | ETA 1 s | env steps 3072 | return 12.35 | 768 env steps/s | 1.5 s/iter | 4 s total"


def test_the_nearest_bound_sets_the_share():
    stop = runners.StopRule(training_iterations=4, env_steps=100_000)
    assert stop.progress(_row()) == 0.75 and "| 75% |" in lifecycle.ProgressLine(stop).of(_row())


def test_after_a_resume_speed_and_eta_count_this_runs_own_steps_and_seconds():
    # resumed at 2048 of 4096 env steps; 1024 more in this run's 4 s: 256 env steps/s, a quarter in 4 s
    line = lifecycle.ProgressLine(runners.StopRule(env_steps=4096), start={ITERATION: 2, ENV_STEPS: 2048}).of(_row())
    assert "| 75% | ETA 4 s |" in line and "| 256 env steps/s |" in line


def test_a_stop_at_cap_below_the_recipes_budget_is_the_bound_in_force():
    line = lifecycle.ProgressLine(runners.StopRule(env_steps=1_000_000), cap=RowBudget.of(None, 4096)).of(_row())
    assert "| 75% | ETA 1 s |" in line
    assert "%" not in lifecycle.ProgressLine(cap=RowBudget()).of(_row())  # no bound at all: no share, no ETA


def test_the_last_return_is_carried_forward_and_a_dash_shows_only_before_the_first():
    progress = lifecycle.ProgressLine()
    assert "return - |" in progress.of(_row(**{RETURN: None}))
    assert "return -88.13 |" in progress.of(_row(**{RETURN: -88.129}))
    assert "return -88.13 |" in progress.of(_row(**{RETURN: float("nan")}))
    assert "return -88.13 |" in progress.of(_row())


class _Cycle:
    def __init__(self):
        self.me = self


def test_objects_alive_on_entry_are_frozen_until_exit_and_collectable_again_after():
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    with lifecycle.long_lived_objects_frozen():
        assert gc.get_freeze_count() > 0
        del cycle
        gc.collect()
        assert alive() is not None  # frozen: no collection reaches it
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None


def test_an_error_inside_unfreezes_too():
    with pytest.raises(RuntimeError, match="boom"), lifecycle.long_lived_objects_frozen():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


class _Algo:
    """Two iterations of 10 env steps; notes whether the collector skipped the long-lived objects."""

    def __init__(self):
        self.frozen_while_training, self.iteration = [], 0

    def train(self):
        self.frozen_while_training.append(gc.get_freeze_count() > 0)
        self.iteration += 1
        return {ITERATION: self.iteration, ENV_STEPS: 10 * self.iteration}

    def save_to_path(self, folder):
        pass


def _recorder():
    """A session that records nothing: rows pass through, checkpoints go nowhere, no stop is asked."""
    return types.SimpleNamespace(
        stop_requested=False,
        budget_cap=RowBudget(),
        log_metrics=lambda row, trial=None: row,
        checkpoint=lambda **_: contextlib.nullcontext("folder"),
        rolling_restart=lambda *_, **__: None,
        rolling_due=lambda *_, **__: False,
    )


def test_an_algorithm_trains_with_its_objects_frozen_and_its_cycles_are_collected_once_it_stops(tmp_path):
    algo, stop_calls = _Algo(), []
    algo.me = algo  # a cycle: only the collector frees it
    algo.stop = lambda: stop_calls.append("stop")
    stopped = weakref.ref(algo)
    training = lifecycle.AlgorithmTraining(
        config=types.SimpleNamespace(build_algo=lambda: stopped()), stop=runners.StopRule(training_iterations=2)
    )
    frozen = algo.frozen_while_training
    del algo
    last = training.run(types.SimpleNamespace(session=_recorder(), artifacts_dir=tmp_path))
    assert last[ITERATION] == 2 and frozen == [True, True]
    assert stop_calls == ["stop"] and gc.get_freeze_count() == 0
    assert stopped() is None  # collected by the run, with no collection of the test's


class _FailingAlgo(_Algo):
    def train(self):
        raise RuntimeError("EnvRunners [1] sent no batch")


def _log_lost_runners():
    """What RLlib logs on stopping runners that were killed: each logger their error, with `exception`."""
    try:
        raise ConnectionError("The actor died unexpectedly")
    except ConnectionError:
        for name in lifecycle.RUNNER_LOGGERS:
            logging.getLogger(name).exception("taking actor 1 out of service")


def test_the_runner_loggers_are_rllibs():
    assert lifecycle.RUNNER_LOGGERS == (actor_manager.logger.name, env_runner_group.logger.name)


@pytest.mark.parametrize("algo_class", [_FailingAlgo, _Algo])
def test_runner_errors_logged_while_stopping_a_failed_run_are_left_out(tmp_path, algo_class):
    algo, stopped = algo_class(), []
    algo.stop = lambda: stopped.append(_log_lost_runners())
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    runner_loggers = [logging.getLogger(name) for name in lifecycle.RUNNER_LOGGERS]
    for runner_logger in runner_loggers:
        runner_logger.addHandler(handler)
    training = lifecycle.AlgorithmTraining(
        config=types.SimpleNamespace(build_algo=lambda: algo), stop=runners.StopRule(training_iterations=1)
    )
    failing = algo_class is _FailingAlgo
    try:
        with pytest.raises(RuntimeError, match="sent no batch") if failing else contextlib.nullcontext():
            training.run(types.SimpleNamespace(session=_recorder(), artifacts_dir=tmp_path))
    finally:
        for runner_logger in runner_loggers:
            runner_logger.removeHandler(handler)
    assert len(stopped) == 1  # stopped all the same
    assert len(records) == (0 if failing else 2)  # a run that succeeded shows what its stop logs
    assert [runner_logger.level for runner_logger in runner_loggers] == [logging.NOTSET] * 2  # restored


@pytest.mark.parametrize(
    "resume, runner, message",
    [
        (
            ResumeSource(parent_run_id="tuned", checkpoint=None, tune_experiment="/t/exp"),
            lambda: runners.DirectRunner(
                PPOConfig(),
                stop=runners.StopRule(training_iterations=1),
                schedule=lambda i: False,
                checkpoint_initial=False,
                parallel_envs=None,
            ),
            "run tuned was a Tune run; resume it with a recipe that calls run_tune",
        ),
        (
            ResumeSource(checkpoint=pathlib.Path("/c/iter_000001")),
            lambda: runners.TuneRunner(
                PPOConfig(),
                stop=runners.StopRule(training_iterations=1),
                num_seeds=1,
                checkpoint_every=1,
                parallel_envs=None,
            ),
            "not from a checkpoint folder: --resume-from <run-id>",
        ),
    ],
)
def test_a_resume_the_runner_cannot_continue_is_a_usage_error_naming_the_fix(tmp_path, resume, runner, message):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=0, resume=resume)
    try:
        with pytest.raises(lifecycle.ResumeRefused, match=re.escape(message)) as refused:
            runner().requests(context)
    finally:
        recorder.finish(COMPLETED)
    assert refused.value.exit_status == 2
