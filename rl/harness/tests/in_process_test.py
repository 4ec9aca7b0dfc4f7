"""The in-process runner on a tiny CartPole PPO: rows, counters, seeding, placement (no Ray started).

The env is RLlib's StatelessCartPole (CartPole without the velocities), as the harness may not
import gymnasium itself (tools/layering/rules.py).
"""

import contextlib
import itertools

import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.examples.envs.classes.stateless_cartpole import StatelessCartPole

from rl.harness.run import seeding
from rl.harness.run.manifest import OwnLoopRunnerRecord, read_manifest
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, ITERATION_SECONDS, RETURN
from rl.harness.run.rows import RowBudget
from rl.harness.run.status import COMPLETED
from rl.harness.tests import contexts
from rl.harness.training import configs, hardware, in_process, runners

BATCH = 128  # 2 envs x 64 steps: random CartPole episodes (about 22 steps) end within one batch
PARALLEL_ENVS = 2


def _config():
    return (
        PPOConfig()
        .environment(StatelessCartPole)
        .training(train_batch_size_per_learner=BATCH, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )


def _env():
    return StatelessCartPole()


def _train(seed: int, iterations: int = 2, **options) -> list[in_process.Update]:
    with in_process.Trainer(_config(), env=_env(), seed=seed, parallel_envs=PARALLEL_ENVS) as trainer:
        return list(trainer.train(runners.StopRule(training_iterations=iterations), **options))


def _losses(update: in_process.Update) -> dict:
    return {key: in_process.scalar(value) for key, value in update.result[DEFAULT_MODULE_ID].items() if "loss" in key}


def _without_time(row: dict) -> dict:
    return {key: value for key, value in row.items() if key != ITERATION_SECONDS}


@pytest.fixture(scope="module")
def seed_3():
    return _train(seed=3)


def test_rows_carry_the_harness_keys_and_count_iterations_and_env_steps(seed_3):
    rows = [update.row for update in seed_3]
    assert [row[ITERATION] for row in rows] == [1, 2]
    steps = [0] + [row[ENV_STEPS] for row in rows]
    # At least the train batch per update (a last vector step may add a few more, as in RLlib).
    assert all(BATCH <= later - earlier < 2 * BATCH for earlier, later in itertools.pairwise(steps))
    assert all(isinstance(row[RETURN], float) for row in rows)  # episodes finished in every batch
    assert all(row[ITERATION_SECONDS] > 0 for row in rows)
    assert _losses(seed_3[0])  # the Learner.update result, per module


def test_the_same_seed_gives_the_same_rows_and_updates_and_another_seed_does_not(seed_3):
    again = _train(seed=3)
    assert [_without_time(update.row) for update in again] == [_without_time(update.row) for update in seed_3]
    assert [_losses(update) for update in again] == [_losses(update) for update in seed_3]
    other = _train(seed=4)
    assert [_losses(update) for update in other] != [_losses(update) for update in seed_3]


def test_the_config_gets_the_seed_local_sampling_and_the_profiles_learner_and_the_recipes_is_unchanged():
    recipe_config = _config()
    profile = in_process.default_profile()
    config = configs.prepare_config(recipe_config, seed=11, parallel_envs=4, profile=profile, in_process=True)
    assert (config.seed, config.num_env_runners, config.num_envs_per_env_runner) == (11, 0, 4)
    assert config.num_gpus_per_learner == profile.num_gpus_per_learner == 0
    assert (recipe_config.seed, recipe_config.num_env_runners, recipe_config.num_envs_per_env_runner) == (None, 2, 1)


def test_a_trainer_sets_the_profiles_torch_threads_and_counts_on_over_calls():
    profile = in_process.default_profile()
    torch.set_num_threads(2)  # what torch would take on two cores
    with in_process.Trainer(_config(), env=_env(), seed=5, parallel_envs=PARALLEL_ENVS, profile=profile) as trainer:
        assert torch.get_num_threads() == profile.torch_threads == hardware.TORCH_THREADS
        entered = []

        @contextlib.contextmanager
        def around_update():
            entered.append(trainer.row[ITERATION])  # entered before the update's row exists
            yield

        first = list(trainer.train(runners.StopRule(training_iterations=1), around_update=around_update))
        second = list(trainer.train(runners.StopRule(training_iterations=2), around_update=around_update))
    assert [update.row[ITERATION] for update in first + second] == [1, 2]
    assert second[0].row[ENV_STEPS] >= first[0].row[ENV_STEPS] + BATCH
    assert entered == [0, 1]  # once per update


def test_a_batch_that_is_not_a_multiple_of_parallel_envs_fails_naming_the_fix():
    with pytest.raises(
        configs.ParallelEnvsError,
        match=r"train batch \(128 env steps\) is not a multiple of"
        r" parallel_envs=3.*sample 129 steps.*dividing 128",
    ):
        in_process.Trainer(_config(), env=_env(), seed=0, parallel_envs=3, profile=in_process.default_profile())


@pytest.mark.parametrize("parallel_envs", [0, True, 2.0])
def test_parallel_envs_must_be_a_positive_integer(parallel_envs):
    with pytest.raises(configs.ParallelEnvsError, match="parallel_envs must be an integer >= 1"):
        in_process.Trainer(
            _config(), env=_env(), seed=0, parallel_envs=parallel_envs, profile=in_process.default_profile()
        )


def test_a_run_through_the_lifecycle_logs_its_rows_and_records_an_in_process_runner(tmp_path):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=11)
    rows = in_process.run_in_process(
        context, _config(), env=_env(), stop=runners.StopRule(training_iterations=2), parallel_envs=PARALLEL_ENVS
    )
    recorder.finish(COMPLETED)
    assert [row[ITERATION] for row in rows] == [1, 2] and rows[-1][ENV_STEPS] >= 2 * BATCH
    assert [row[ITERATION] for row in context.metrics()] == [1, 2]
    manifest = read_manifest(context.results_dir)
    assert isinstance(manifest.runner, OwnLoopRunnerRecord) and manifest.runner.kind == "in_process"
    assert manifest.runner.details["rllib_seed"] == seeding.SeedStreams(11).integer("rllib")
    assert manifest.runner.details["sampling"]["num_envs_per_env_runner"] == PARALLEL_ENVS


def test_a_stop_request_ends_the_in_process_run_after_the_current_iteration(tmp_path):
    # The budget cap (--iterations 1) asks the session to stop once the first row is logged, as a signal would.
    context, recorder = contexts.recorded_context(tmp_path, root_seed=11, budget_cap=RowBudget.of(1, None))
    rows = in_process.run_in_process(
        context, _config(), env=_env(), stop=runners.StopRule(training_iterations=5), parallel_envs=PARALLEL_ENVS
    )
    recorder.finish(COMPLETED)
    assert recorder.stop_requested and [row[ITERATION] for row in rows] == [1]
    assert [row[ITERATION] for row in context.metrics()] == [1]
