"""PipelinedPPO: every update trains on a batch sampled with weights at most one update old.

The bound is checked twice: by the lag the algorithm logs (read from the weights number each sampled
step carries) and independently, by recomputing each sampled step's logp from snapshots of the
Learner's weights: the batch of update k (k >= 1) is reproduced by the weights before update k-1,
not by those of update k. A runner killed while sampling is restarted and samples the batch again
with the Learner's weights (lag 0), or, with restarts off, the run ends with one line. The Ray parts
are slow (a remote EnvRunner). The KL term's reference is checked without Ray: the Learner's logits
at the update's start, not the sampling policy's.
"""

import copy
import os
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.exceptions import GetTimeoutError
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.metrics import FAULT_TOLERANCE_STATS, NUM_ENV_STEPS_SAMPLED_LIFETIME, WEIGHTS_SEQ_NO

from rl.learners import ActorCriticPPOTorchLearner, PipelinedPPOConfig
from rl.learners.models import MLPModel
from rl.learners.pipelined import POLICY_LAG, policy_lag
from rl.learners.tests.stuck_env import CartPoleStuckAfter
from rl.learners.tests.training import local_ray

ITERATIONS = 4


def _episode(weights: list[int]) -> SingleAgentEpisode:
    episode = SingleAgentEpisode(
        observations=[0] * (len(weights) + 1),
        actions=[0] * len(weights),
        rewards=[0.0] * len(weights),
        extra_model_outputs={WEIGHTS_SEQ_NO: list(weights)},
        len_lookback_buffer=0,
    )
    return episode.to_numpy()


def test_policy_lag_counts_updates_from_the_oldest_sampled_step():
    assert policy_lag(5, [_episode([5, 5]), _episode([5])]) == 0
    assert policy_lag(5, [_episode([5, 5]), _episode([4, 5])]) == 1  # a step sampled before the last sync
    assert policy_lag(7, [_episode([4])]) == 3
    with pytest.raises(ValueError, match="no episode holds a sampled step"):
        policy_lag(1, [])


def _cartpole(config_class):
    return (
        config_class()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MLPModel, model_config={"hidden_sizes": (16,)}))
        .training(train_batch_size_per_learner=64, minibatch_size=32)
        .learners(learner_class=ActorCriticPPOTorchLearner)
        .debugging(seed=0)
    )


@pytest.mark.parametrize("config_class", [PipelinedPPOConfig, PPOConfig])
def test_a_pipelined_learners_kl_reference_is_the_policy_its_update_starts_from(config_class):
    config = _cartpole(config_class)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    runner = SingleAgentEnvRunner(config=config)
    runner.module.set_state(learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True))
    episodes = runner.sample(num_timesteps=64, random_actions=False)
    sampled = np.concatenate([np.asarray(e.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS)) for e in episodes])
    logp = np.concatenate([np.asarray(e.get_extra_model_outputs(Columns.ACTION_LOGP)) for e in episodes])
    module = learner.module[DEFAULT_MODULE_ID]
    with torch.no_grad():  # one update later: the Learner's weights moved
        for param in module.parameters():
            param.add_(0.05 * torch.randn_like(param))
    batch = learner._make_batch_if_necessary(TrainingData(episodes=episodes))[DEFAULT_MODULE_ID]
    steps = batch[Columns.LOSS_MASK].bool()  # the sampled steps, without the bootstrap steps
    with torch.no_grad():
        updated = module.forward_inference({Columns.OBS: batch[Columns.OBS]})[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(batch[Columns.ACTION_LOGP][steps], torch.as_tensor(logp))  # the ratio's: behaviour
    expected = updated[steps] if config_class is PipelinedPPOConfig else torch.as_tensor(sampled)
    torch.testing.assert_close(batch[Columns.ACTION_DIST_INPUTS][steps], expected)
    runner.stop()


def _module_weights(algo) -> dict:
    state = algo.learner_group.get_state(components=f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}")
    return copy.deepcopy(state[COMPONENT_LEARNER][COMPONENT_RL_MODULE][DEFAULT_MODULE_ID])


def _sampled_logp_matches(module, weights: dict, episodes: list) -> bool:
    """Whether `weights` give every sampled step's recorded logp (to float tolerance)."""
    module.set_state(weights)
    for episode in episodes:
        observations = torch.as_tensor(np.asarray(episode.get_observations(slice(0, len(episode)))))
        actions = torch.as_tensor(np.asarray(episode.get_actions()))
        with torch.no_grad():
            logits = module.forward_inference({Columns.OBS: observations})[Columns.ACTION_DIST_INPUTS]
        logp = torch.log_softmax(logits, dim=-1).gather(1, actions.long().unsqueeze(1)).squeeze(1)
        recorded = torch.as_tensor(np.asarray(episode.get_extra_model_outputs(Columns.ACTION_LOGP)))
        if not torch.allclose(logp, recorded.float(), atol=1e-5, rtol=1e-5):
            return False
    return True


@pytest.mark.slow
def test_each_update_trains_on_a_batch_sampled_with_the_weights_one_update_older(tmp_path):
    config = (
        PipelinedPPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=1, num_envs_per_env_runner=4)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MLPModel, model_config={"hidden_sizes": (16,)}))
        .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=2, lr=1e-2)
        .learners(learner_class=ActorCriticPPOTorchLearner)
        .debugging(seed=0)
    )
    with local_ray(tmp_path):
        algo = config.build_algo()
        try:
            before_update, batches = [], []
            update = algo.learner_group.update

            def recording_update(*args, episodes, **kwargs):
                before_update.append(_module_weights(algo))
                batches.append(copy.deepcopy(episodes))
                return update(*args, episodes=episodes, **kwargs)

            algo.learner_group.update = recording_update
            lags = [algo.train()[POLICY_LAG] for _ in range(ITERATIONS)]
        finally:
            algo.stop()
    assert lags == [0] + [1] * (ITERATIONS - 1)
    env = gym.make("CartPole-v1")
    module = MLPModel(
        observation_space=env.observation_space,
        action_space=env.action_space,
        model_config={"hidden_sizes": (16,)},
        inference_only=True,
    )
    assert _sampled_logp_matches(module, before_update[0], batches[0])  # the first batch: the same weights
    for k in range(1, ITERATIONS):
        assert _sampled_logp_matches(module, before_update[k - 1], batches[k]), k  # one update older
        assert not _sampled_logp_matches(module, before_update[k], batches[k]), k  # not the Learner's own


def _runner_killed_while_sampling(
    tmp_path, *, restart_failed_env_runners: bool, iterations_after_kill: int, runners: int = 1
) -> tuple[list, list]:
    """Trains one iteration, SIGKILLs the first of `runners` remote EnvRunners while it samples the next batch,
    trains on.

    Returns the results of the iterations after the kill and the runner indices each
    `on_env_runners_recreated` callback was given. Sampling a batch takes far longer than the update on
    it (one epoch, one minibatch), so the runner is sampling when train() returns and the kill lands.
    """
    config = (
        _cartpole(PipelinedPPOConfig)
        .env_runners(num_env_runners=runners)
        .training(train_batch_size_per_learner=2000, minibatch_size=2000, num_epochs=1)
        .fault_tolerance(restart_failed_env_runners=restart_failed_env_runners)
        .callbacks(on_env_runners_recreated=lambda env_runner_indices, **_: recreated.append(env_runner_indices))
    )
    recreated = []
    with local_ray(tmp_path):
        algo = config.build_algo()
        try:
            pid, *_ = algo.env_runner_group.foreach_env_runner(lambda runner: os.getpid(), local_env_runner=False)
            algo.train()  # returns with the next batch requested
            os.kill(pid, signal.SIGKILL)
            return [algo.train() for _ in range(iterations_after_kill)], recreated
        finally:
            algo.stop()


@pytest.mark.slow
def test_a_runner_killed_while_sampling_is_restarted_and_samples_with_the_learners_weights(tmp_path):
    (after_kill, *later), recreated = _runner_killed_while_sampling(
        tmp_path, restart_failed_env_runners=True, iterations_after_kill=3
    )
    assert recreated == [[1]]  # RLlib's callback, as its sequential loop calls it
    assert after_kill[FAULT_TOLERANCE_STATS]["num_remote_worker_restarts"] == 1
    assert after_kill[POLICY_LAG] == 0  # the batch lost with the runner is sampled again, with the Learner's weights
    assert [result[POLICY_LAG] for result in later] == [1, 1]
    assert later[-1][FAULT_TOLERANCE_STATS]["num_remote_worker_restarts"] == 1
    # 2000 steps an iteration, before and after the kill: the lost batch is sampled once, in full.
    assert [result[NUM_ENV_STEPS_SAMPLED_LIFETIME] for result in (after_kill, *later)] == [4000, 6000, 8000]


@pytest.mark.slow
def test_of_two_runners_the_killed_one_samples_again_and_the_other_ones_batch_is_kept(tmp_path):
    (after_kill, *later), recreated = _runner_killed_while_sampling(
        tmp_path, restart_failed_env_runners=True, iterations_after_kill=3, runners=2
    )
    assert recreated == [[1]]
    assert after_kill[FAULT_TOLERANCE_STATS]["num_remote_worker_restarts"] == 1
    assert [result[POLICY_LAG] for result in (after_kill, *later)] == [1, 1, 1]  # the other runner's part lags one
    assert [result[NUM_ENV_STEPS_SAMPLED_LIFETIME] for result in (after_kill, *later)] == [4000, 6000, 8000]


@pytest.mark.slow
def test_a_runner_killed_without_restarts_ends_the_run_with_one_line_naming_the_fix(tmp_path):
    with pytest.raises(
        RuntimeError, match="died while sampling and restart_failed_env_runners is off.*--resume-from"
    ) as raised:
        _runner_killed_while_sampling(tmp_path, restart_failed_env_runners=False, iterations_after_kill=1)
    assert "\n" not in str(raised.value)


@pytest.mark.slow
def test_a_runner_silent_past_the_sample_timeout_ends_the_run_with_one_line_naming_the_setting(tmp_path):
    # A 2000-step CartPole batch takes the runner over a second: far past 0.2 s.
    config = (
        _cartpole(PipelinedPPOConfig)
        .env_runners(num_env_runners=1, sample_timeout_s=0.2)
        .training(train_batch_size_per_learner=2000, minibatch_size=2000, num_epochs=1)
    )
    with local_ray(tmp_path):
        algo = config.build_algo()
        try:
            with pytest.raises(
                RuntimeError, match=r"EnvRunners \[1\] sent no batch within sample_timeout_s=0.2 s"
            ) as raised:
                algo.train()
        finally:
            algo.stop()
    assert "\n" not in str(raised.value) and "--resume-from" in str(raised.value)
    assert isinstance(raised.value.__cause__, GetTimeoutError)


@pytest.mark.slow
def test_a_runner_stuck_in_an_env_step_is_stopped_so_the_run_ends_with_one_line(tmp_path):
    # The first batch (1000 steps) samples; the next one hangs at its 500th step, for good. The timeout
    # leaves the first batch time on a loaded machine.
    config = (
        _cartpole(PipelinedPPOConfig)
        .environment(CartPoleStuckAfter, env_config={"steps": 1500})
        .env_runners(num_env_runners=1, sample_timeout_s=10)
        .training(train_batch_size_per_learner=1000, minibatch_size=1000, num_epochs=1)
    )
    with local_ray(tmp_path):
        algo = config.build_algo()
        pids = algo.env_runner_group.foreach_env_runner(lambda runner: os.getpid(), local_env_runner=False)
        try:
            algo.train()
            with pytest.raises(
                RuntimeError, match=r"EnvRunners \[1\] sent no batch within sample_timeout_s=10"
            ) as raised:
                algo.train()
        finally:
            # RLlib's stop() calls every runner: one still in its batch would hold it up for good.
            stop = threading.Thread(target=algo.stop, daemon=True)
            started = time.monotonic()
            stop.start()
            stop.join(timeout=60)
            if stop.is_alive():  # the test fails below; Ray's shutdown must not wait on the runner too
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
    assert not stop.is_alive(), "Algorithm.stop() still waits on the stuck runner after 60 s"
    assert time.monotonic() - started < 30
    assert "\n" not in str(raised.value)
