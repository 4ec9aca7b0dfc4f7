"""PPG learns CartPole-v1 and runs under build_algo and Ray Tune with remote EnvRunners and Learner.

Budget: 250,000 env steps; one process, torch on one thread, in-process EnvRunner (8
vectorised envs), seed 0; an auxiliary phase every 4 iterations. Measured under Bazel on
the 2-core dev machine: solved after 60,071 env steps in 33 s; 71 s for the target (three
tests, Ray start-up included). Records go to $TEST_UNDECLARED_OUTPUTS_DIR/cartpole_ppg_mlp.json.
"""

import numpy as np
import pytest
from ray import tune
from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import LEARNER_RESULTS

from rl.learners import PPGConfig
from rl.learners.tests.training import local_ray, save_record, train_until

pytestmark = pytest.mark.slow

TARGET_RETURN = 450.0
MAX_ENV_STEPS = 250_000
# KL(pi_frozen || pi) with beta_clone = 1 and value coefficients 0.001: the last aux epoch's
# mean and the largest minibatch value.
AUX_KL_MEAN_BOUND = 0.03
AUX_KL_MAX_BOUND = 0.1


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("ray_results")
    with local_ray(path):
        yield path


def cartpole_config():
    return (
        PPGConfig()
        .environment("CartPole-v1")
        # RLlib's tuned CartPole PPO settings. Value coefficients 0.001: with returns of order
        # 100-500 the aux value loss starts near 1e3, so coeff * loss ~ 1, comparable to the KL
        # (at 0.01 the phase's mean KL reached 0.043).
        .training(
            lr=3e-4,
            train_batch_size_per_learner=4000,
            minibatch_size=128,
            num_epochs=6,
            entropy_coeff=0.0,
            policy_iterations_per_aux=4,
            aux_epochs=6,
            aux_minibatch_size=512,
            aux_lr=3e-4,
            beta_clone=1.0,
            aux_value_loss_coeff=0.001,
            aux_true_value_loss_coeff=0.001,
        )
        .env_runners(num_env_runners=0, num_envs_per_env_runner=8)
        .debugging(seed=0)
    )


def aux_rows(results):
    """The learner results of the iterations that ran an auxiliary phase."""
    rows = [result[LEARNER_RESULTS] for result in results]
    return [row[DEFAULT_MODULE_ID] for row in rows if row[ALL_MODULES].get("ppg/aux_phase_triggered") == 1.0]


def test_ppg_solves_cartpole_and_aux_phases_fit_values_without_moving_the_policy(results_dir):
    results = []
    record = train_until(
        cartpole_config(), target_return=TARGET_RETURN, max_env_steps=MAX_ENV_STEPS, on_result=results.append
    )
    save_record("cartpole_ppg_mlp", record)
    assert record.reached, f"mean return {record.returns[-3:]} after {record.env_steps} env steps"
    phases = aux_rows(results)
    assert phases, "no auxiliary phase ran"
    for row in phases:
        print({key: round(float(value), 4) for key, value in row.items() if key.startswith("ppg/")})
        assert row["ppg/aux_value_loss"] < row["ppg/aux_value_loss_first_epoch"]
        assert row["ppg/aux_kl"] < AUX_KL_MEAN_BOUND
        assert row["ppg/aux_kl_max"] < AUX_KL_MAX_BOUND


def test_ppg_runs_under_tune_with_remote_env_runners_and_learner(results_dir):
    config = (
        cartpole_config()
        .training(train_batch_size_per_learner=500, minibatch_size=100, num_epochs=1, policy_iterations_per_aux=2)
        .env_runners(num_env_runners=1, num_envs_per_env_runner=2)
        .learners(num_learners=1)
        # The trial's driver needs no CPU of its own: 2 = the remote EnvRunner + the remote Learner.
        .resources(num_cpus_for_main_process=0)
    )
    tuner = tune.Tuner(
        config.algo_class,
        param_space=config,
        run_config=tune.RunConfig(stop={"training_iteration": 4}, storage_path=str(results_dir), verbose=0),
    )
    (result,) = tuner.fit()
    assert result.error is None, result.error
    learner_results = result.metrics[LEARNER_RESULTS]
    assert learner_results[ALL_MODULES]["ppg/aux_phase_triggered"] == 1.0
    assert learner_results[ALL_MODULES]["ppg/iterations_since_aux"] == 2


def learner_cycle(algo):
    """(iterations since the last aux phase, buffered batches) of the algorithm's one Learner."""
    (call,) = algo.learner_group.foreach_learner(
        lambda learner: (learner.iterations_since_aux, len(learner.aux_buffer.batches))
    )
    return call.get()


def test_algorithm_checkpoint_keeps_the_aux_optimizer_and_restarts_the_cycle(results_dir, tmp_path):
    config = cartpole_config().training(
        train_batch_size_per_learner=500, minibatch_size=100, num_epochs=1, policy_iterations_per_aux=2
    )
    algo = config.build_algo()
    try:
        for _ in range(3):  # an aux phase after iteration 2, then one buffered batch
            algo.train()
        cycle = learner_cycle(algo)
        assert cycle == (1, 1)
        saved = algo.learner_group.get_state()["learner"]["ppg_aux_optimizer"][DEFAULT_MODULE_ID]
        algo.save_to_path(str(tmp_path / "checkpoint"))
    finally:
        algo.stop()
    restored = config.build_algo()
    try:
        restored.restore_from_path(str(tmp_path / "checkpoint"))
        cycle = learner_cycle(restored)
        assert cycle == (0, 0)
        loaded = restored.learner_group.get_state()["learner"]["ppg_aux_optimizer"][DEFAULT_MODULE_ID]
        for index, values in saved["state"].items():
            np.testing.assert_allclose(loaded["state"][index]["exp_avg"], values["exp_avg"])
        # The restarted cycle: the next aux phase comes policy_iterations_per_aux iterations later.
        results = [restored.train()[LEARNER_RESULTS][ALL_MODULES]["ppg/aux_phase_triggered"] for _ in range(2)]
        assert results == [0.0, 1.0]
    finally:
        restored.stop()
