"""The rolling checkpoint: refreshed by minutes or budget share, one per line, replaced only once the new one is complete."""

import math
import os
import types

import pytest

from rl.harness.run import rolling
from rl.harness.run.manifest import read_manifest
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION
from rl.harness.tests.contexts import recorded_context
from rl.harness.training import lifecycle, runners


class _Algo:
    """Counts iterations of 10 env steps; saves a file naming its iteration; fails where told to."""

    def __init__(self, fail_train_at=None, fail_save_at=None):
        self.iteration, self.fail_train_at, self.fail_save_at = 0, fail_train_at, fail_save_at

    def train(self):
        self.iteration += 1
        if self.iteration == self.fail_train_at:
            raise RuntimeError("the learner died")
        return {ITERATION: self.iteration, ENV_STEPS: 10 * self.iteration}

    def save_to_path(self, folder):
        if self.iteration == self.fail_save_at:
            raise OSError(28, "No space left on device")
        with open(os.path.join(folder, "state"), "w") as handle:
            handle.write(str(self.iteration))

    def stop(self):
        pass


def _training(algo, iterations, schedule=None):
    config = types.SimpleNamespace(build_algo=lambda: algo)
    return lifecycle.AlgorithmTraining(config, runners.StopRule(training_iterations=iterations), schedule=schedule)


@pytest.fixture
def free_saves(monkeypatch):
    """The fake algorithm's iterations take no time: no save is too costly for the cadence."""
    monkeypatch.setattr(rolling, "MAX_COST_SHARE", math.inf)


def _folders(recorder):
    return sorted(name for name in os.listdir(recorder.checkpoints_dir) if not name.startswith("."))


def test_the_clock_is_due_after_its_minutes_or_its_budget_share_whichever_comes_first():
    now = [0.0]
    clock = rolling.RollingClock(rolling.RollingCadence(minutes=2, budget_fraction=0.25), clock=lambda: now[0])
    clock.restart(None, 0.0, save_s=0.0)  # a save that cost nothing: only the cadence decides
    now[0] = 119.0
    assert not clock.due(None, 0.2)
    assert clock.due(None, 0.25)  # a quarter of the budget
    now[0] = 120.0
    assert clock.due(None, 0.01)  # two minutes
    clock.restart(None, 0.3)
    assert not clock.due(None, 0.5) and clock.due(None, 0.55)
    assert not clock.due("agent_b", 0.9)  # a line seen for the first time starts its clock


def test_a_slow_save_delays_the_next_rolling_one_so_saves_cost_at_most_a_quarter_percent():
    now = [0.0]
    clock = rolling.RollingClock(rolling.RollingCadence(minutes=10, budget_fraction=0.1), clock=lambda: now[0])
    clock.restart(None, 0.0, save_s=0.1)  # 0.1 s to save: the next one no sooner than 40 s later
    now[0] = 39.0
    assert not clock.due(None, 0.5)
    now[0] = 40.0
    assert clock.due(None, 0.1)
    assert 0.1 / 40.0 == rolling.MAX_COST_SHARE


def test_before_any_save_is_timed_a_save_is_assumed_to_cost_what_a_small_model_s_does():
    now = [0.0]
    clock = rolling.RollingClock(rolling.RollingCadence(minutes=10, budget_fraction=0.1), clock=lambda: now[0])
    clock.restart(None, 0.0)  # training starts: no save timed yet
    now[0] = rolling.ASSUMED_SAVE_S / rolling.MAX_COST_SHARE - 0.5  # 9.5 s
    assert not clock.due(None, 0.5)
    now[0] += 0.5
    assert clock.due(None, 0.5)
    clock.restart(None, 0.5, save_s=0.002)  # a fast save, timed: the next one may come 0.8 s later
    clock.restart(None, 0.5)  # training restarts (a new agent's line would start afresh): the timed cost stays
    now[0] += 0.8
    assert clock.due(None, 0.6)


@pytest.mark.parametrize("minutes, fraction", [(0, 0.1), (float("nan"), 0.1), (1, 0), (1, 1.5)])
def test_a_bad_cadence_is_refused(minutes, fraction):
    with pytest.raises(ValueError, match="give a"):
        rolling.RollingCadence(minutes=minutes, budget_fraction=fraction)


def test_a_crash_resumes_from_the_rolling_checkpoint_and_loses_at_most_a_tenth_of_the_budget(tmp_path, free_saves):
    context, recorder = recorded_context(tmp_path, root_seed=1)
    log_spaced = runners.LogSpaced(2.0)  # science checkpoints at 1, 2, 4, 8, 16, 32
    with pytest.raises(RuntimeError, match="the learner died"):
        _training(_Algo(fail_train_at=48), 50, schedule=log_spaced).run(context)
    recorder.finish("failed")
    manifest = read_manifest(recorder.results_dir)
    assert [c.iteration for c in manifest.checkpoints] == [1, 2, 4, 8, 16, 32]
    # 5 iterations (10 % of 50) after the last save of any kind: 37, 42, 47
    assert [c.iteration for c in manifest.rolling_checkpoints] == [47]
    newest = manifest.resumable_checkpoint()
    assert newest.path == "checkpoints/rolling_iter_000047" and 48 - newest.iteration <= 5
    # only one rolling folder is kept, and it is complete
    assert _folders(recorder) == [*(f"iter_{i:06d}" for i in (1, 2, 4, 8, 16, 32)), "rolling_iter_000047"]
    assert (recorder.artifacts_dir / newest.path / "state").read_text() == "47"


def test_a_science_checkpoint_at_or_past_the_rolling_one_replaces_it(tmp_path, free_saves):
    context, recorder = recorded_context(tmp_path, root_seed=1)
    _training(_Algo(), 20).run(context)
    recorder.finish("completed")
    manifest = read_manifest(recorder.results_dir)
    assert manifest.rolling_checkpoints == () and [c.iteration for c in manifest.checkpoints] == [20]
    assert _folders(recorder) == ["iter_000020"]


def test_the_old_rolling_checkpoint_stays_until_a_new_one_is_complete(tmp_path, free_saves):
    context, recorder = recorded_context(tmp_path, root_seed=1)
    with pytest.raises(OSError, match="No space left"):
        _training(_Algo(fail_save_at=6), 20).run(context)  # rolling saves at 2, 4, then 6 fails
    recorder.finish("failed")
    manifest = read_manifest(recorder.results_dir)
    assert [c.iteration for c in manifest.rolling_checkpoints] == [4]
    assert _folders(recorder) == ["rolling_iter_000004"]
    assert not [name for name in os.listdir(recorder.checkpoints_dir) if name.startswith(".partial-")]
