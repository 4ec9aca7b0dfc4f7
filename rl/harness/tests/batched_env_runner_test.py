"""The batched EnvRunner returns RLlib's episodes and metrics, and the Learner builds the same batch from them."""

import copy
import gc
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.tune.registry import register_env
from ray.util.metrics import Counter

from rl.harness.tests.episodes import assert_equal_nests, assert_same_episodes, numpy_copies
from rl.harness.training.batched_env_runner import BatchedEnvRunner, ListInfoVectorEnv, why_not_batched
from rl.harness.training.sampling_connectors import map_arrays, use_fast_connectors

# RLlib's default PPO module with an LSTM: recurrent state in and out of every step.
LSTM = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 8, "fcnet_hiddens": [16]}
# Sample sizes that cut episodes mid-way, end a call right after episodes ended, and are no multiple of the envs.
SAMPLES = (150, 150, 37, 64)
RLLIB_METRICS = (
    "episode_return_mean",
    "episode_len_mean",
    "episode_len_max",
    "num_episodes",
    "num_env_steps_sampled",
    "num_env_steps_sampled_lifetime",
    "num_episodes_lifetime",
    "env_to_module_sum_episodes_length_in",
    "env_to_module_sum_episodes_length_out",
)


def config_for(env="CartPole-v1", model_config=None, **env_runner_settings) -> PPOConfig:
    config = (
        PPOConfig()
        .environment(env)
        .rl_module(model_config=model_config or {"fcnet_hiddens": [16]})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=4, **env_runner_settings)
        .debugging(seed=11)
    )
    use_fast_connectors(config)
    return config


def sample_with(runner_class, config: PPOConfig, *, explore=True, sizes=SAMPLES):
    """(episodes of every sample() call, the runner's reduced metrics), the module's weights seeded alike."""
    torch.manual_seed(0)
    runner = runner_class(config=config.copy(copy_frozen=False))
    try:
        if runner_class is BatchedEnvRunner:
            assert runner.fallback is None, runner.fallback
        calls = [runner.sample(num_timesteps=size, explore=explore) for size in sizes]
        return calls, runner.get_metrics()
    finally:
        runner.stop()


def assert_same_samples(expected_calls: list, actual_calls: list) -> None:
    for expected, actual in zip(expected_calls, actual_calls, strict=True):
        assert [type(episode) for episode in expected] == [type(episode) for episode in actual]
        assert all(episode.is_numpy for episode in actual)  # built from the step arrays, whatever the config says
        assert_same_episodes(numpy_copies(expected), numpy_copies(actual))
    # A chunk that continues an episode cut by an earlier call carries that episode's id in both.
    ids = [[(episode.id_, episode.t_started) for episode in call] for call in expected_calls]
    continuing = lambda calls: [[index for index, (id_, start) in enumerate(call) if start > 0] for call in calls]
    assert continuing(ids) == continuing([[(e.id_, e.t_started) for e in call] for call in actual_calls])
    assert any(episode.is_done for call in expected_calls for episode in call), "the test needs episodes that end"
    assert any(episode.t_started > 0 for call in expected_calls for episode in call), "and chunks that continue"


def assert_same_metrics(expected: dict, actual: dict) -> None:
    assert sorted(expected) == sorted(actual)
    for key in RLLIB_METRICS:
        assert expected[key].peek() == actual[key].peek(), key


class _InfoCartPole(gym.Wrapper):
    """CartPole whose infos hold what Mess3's do: Python ints and floats, an array and a nested dict."""

    def __init__(self, _config=None):
        super().__init__(gym.make("CartPole-v1"))
        self.steps = 0

    def _info(self, observation):
        self.steps += 1
        return {
            "state": self.steps % 3,
            "token": int(observation[0] > 0),
            "belief": np.abs(observation[:3]) / 2,
            "reward_components": {"pole": float(observation[2])},
        }

    def reset(self, **kwargs):
        observation, _ = self.env.reset(**kwargs)
        return observation, self._info(observation)

    def step(self, action):
        observation, reward, terminated, truncated, _ = self.env.step(action)
        return observation, reward, terminated, truncated, self._info(observation)


register_env("info_cartpole", _InfoCartPole)


@pytest.mark.parametrize("model_config", [None, LSTM], ids=["stateless", "lstm"])
@pytest.mark.parametrize("episodes_to_numpy", [False, True], ids=["list_episodes", "numpy_episodes"])
@pytest.mark.parametrize("env", ["CartPole-v1", "info_cartpole"])
def test_the_episodes_and_metrics_are_rllibs(model_config, episodes_to_numpy, env):
    config = config_for(env, model_config=model_config, episodes_to_numpy=episodes_to_numpy)
    (expected, expected_metrics), (actual, actual_metrics) = (
        sample_with(SingleAgentEnvRunner, config),
        sample_with(BatchedEnvRunner, config),
    )
    assert_same_samples(expected, actual)
    assert_same_metrics(expected_metrics, actual_metrics)


def test_rays_env_step_counters_count_what_rllibs_runner_counts(monkeypatch):
    counted = []
    inc = Counter.inc
    monkeypatch.setattr(
        Counter,
        "inc",
        lambda counter, value=1.0, tags=None: (
            counted.append((counter.info["name"], value)) or inc(counter, value, tags)
        ),
    )
    totals, calls = [], []
    for runner_class in (SingleAgentEnvRunner, BatchedEnvRunner):
        counted.clear()
        sample_with(runner_class, config_for())
        totals.append({name: sum(value for named, value in counted if named == name) for name, _ in counted})
        calls.append(len(counted))
    assert totals[0] == totals[1] and totals[0]["rllib_env_runner_num_try_env_step_counter"] > len(SAMPLES)
    assert calls[1] == 2 * len(SAMPLES)  # each counter once a sample() call


def test_greedy_sampling_is_rllibs():
    config = config_for(model_config=LSTM)
    assert_same_samples(
        sample_with(SingleAgentEnvRunner, config, explore=False)[0],
        sample_with(BatchedEnvRunner, config, explore=False)[0],
    )


def test_the_learner_builds_the_same_batch():
    config = config_for(model_config=LSTM, episodes_to_numpy=False)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    batches = []
    for runner_class in (SingleAgentEnvRunner, BatchedEnvRunner):
        episodes = list(itertools.chain.from_iterable(sample_with(runner_class, config)[0]))
        pipeline = config.build_learner_connector(input_observation_space=None, input_action_space=None)
        with torch.no_grad():
            batches.append(
                pipeline(rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={})[
                    DEFAULT_MODULE_ID
                ]
            )
    assert_equal_nests(*batches, "learner batch")


class _ChunkStartStatesLearner(PPOTorchLearner):
    """A Learner that says it reads recurrent states only at chunk starts; it stores what it is given as is."""

    @staticmethod
    def store_chunk_start_states(episode, **states):
        episode.custom_data["stored_states"] = states


def _without_states(episode):
    copied = copy.deepcopy(episode)
    copied.extra_model_outputs.pop(Columns.STATE_OUT, None)
    return copied


def test_for_a_learner_that_reads_chunk_start_states_it_keeps_only_those_and_the_look_back():
    # RLlib's runner keeps every step's STATE_OUT; this one keeps the chunk ends' and the last one, which RLlib's
    # cut keeps as look-back: the same states, taken from the same steps, and every other column the same.
    config = config_for(model_config=LSTM)
    chunk_config = config.copy(copy_frozen=False).learners(learner_class=_ChunkStartStatesLearner)
    calls, cuts = [], []
    for runner_class, runner_config in ((SingleAgentEnvRunner, config), (BatchedEnvRunner, chunk_config)):
        torch.manual_seed(0)
        runner = runner_class(config=runner_config.copy(copy_frozen=False))
        try:
            calls.append([])
            cuts.append([])
            for size in SAMPLES:
                calls[-1].append(numpy_copies(runner.sample(num_timesteps=size)))
                cuts[-1].append(copy.deepcopy(runner._ongoing_episodes))
        finally:
            runner.stop()
    (expected, chunked), (expected_cuts, chunked_cuts) = calls, cuts
    length = LSTM["max_seq_len"]
    without_states = lambda calls: [[_without_states(episode) for episode in call] for call in calls]
    assert_same_samples(without_states(expected), without_states(chunked))
    for rllib, fast in zip(itertools.chain(*expected), itertools.chain(*chunked), strict=True):
        assert Columns.STATE_OUT not in fast.extra_model_outputs
        stored = fast.custom_data["stored_states"]
        outs = rllib.get_extra_model_outputs(Columns.STATE_OUT)
        assert stored["max_seq_len"] == length
        assert_equal_nests(map_arrays(lambda states: states[length - 1 :: length], outs), stored["chunk_ends"], "ends")
        if rllib.t_started == 0:
            assert stored["look_back"] is None
        else:
            look_back = rllib.get_extra_model_outputs(Columns.STATE_OUT, indices=-1, neg_index_as_lookback=True)
            assert_equal_nests(look_back, stored["look_back"], "look-back")
    assert any(len(episode) >= 2 * length for call in expected for episode in call), "the test needs several chunks"
    for rllib_cuts, fast_cuts in zip(expected_cuts, chunked_cuts, strict=True):
        for rllib, fast in zip(rllib_cuts, fast_cuts, strict=True):
            assert "stored_states" not in fast.custom_data  # stored after the cut, in the returned chunk only
            if Columns.STATE_OUT in rllib.extra_model_outputs:
                assert_equal_nests(
                    rllib.get_extra_model_outputs(Columns.STATE_OUT, indices=-1, neg_index_as_lookback=True),
                    fast.get_extra_model_outputs(Columns.STATE_OUT, indices=-1, neg_index_as_lookback=True),
                    "cut",
                )
            else:
                assert Columns.STATE_OUT not in fast.extra_model_outputs


class _FailingCartPole(gym.Wrapper):
    """CartPole whose step raises once, at the `FAIL_AT`-th step of any copy since `failures` was reset."""

    FAIL_AT = 90
    steps = 0
    failed = False

    def __init__(self, _config=None):
        super().__init__(gym.make("CartPole-v1"))

    def step(self, action):
        type(self).steps += 1
        if type(self).steps == self.FAIL_AT and not type(self).failed:
            type(self).failed = True
            raise RuntimeError("the simulator crashed")
        return self.env.step(action)


register_env("failing_cartpole", _FailingCartPole)


def test_an_env_that_fails_is_recreated_and_its_unfinished_episodes_dropped_as_rllib_does():
    config = config_for("failing_cartpole").fault_tolerance(restart_failed_sub_environments=True)
    samples = []
    for runner_class in (SingleAgentEnvRunner, BatchedEnvRunner):
        _FailingCartPole.steps, _FailingCartPole.failed = 0, False
        samples.append(sample_with(runner_class, config))
        assert _FailingCartPole.failed
    assert_same_samples(samples[0][0], samples[1][0])
    assert_same_metrics(samples[0][1], samples[1][1])


def test_the_vector_env_hands_over_each_envs_own_infos():
    runner = BatchedEnvRunner(config=config_for("info_cartpole"))
    try:
        assert isinstance(runner.env, ListInfoVectorEnv)
        [episode, *_] = runner.sample(num_timesteps=8)
        info = episode.get_infos(-1)
        assert isinstance(info["state"], int) and isinstance(info["reward_components"]["pole"], float)
    finally:
        runner.stop()


def test_a_remote_runner_freezes_its_long_lived_objects_and_the_local_one_leaves_them_to_the_driver():
    # The local runner lives in the driver, whose training loop freezes and unfreezes its own objects.
    gc.unfreeze()
    local = BatchedEnvRunner(config=config_for("info_cartpole"))
    assert gc.get_freeze_count() == 0
    local.stop()
    remote = BatchedEnvRunner(config=config_for("info_cartpole"), worker_index=1)
    try:
        assert gc.get_freeze_count() > 10_000  # the imports and the module, at least
    finally:
        remote.stop()
        gc.unfreeze()


def test_a_runner_skips_torchs_fill_of_new_tensors_in_its_process(monkeypatch):
    # A remote runner's or a Tune trial's process: no harness code but the runner sets it there.
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    runner = BatchedEnvRunner(config=config_for("info_cartpole"), worker_index=1)
    try:
        assert torch.utils.deterministic.fill_uninitialized_memory is False
    finally:
        runner.stop()
        gc.unfreeze()


def test_configs_it_cannot_batch_sample_with_rllibs_loop_and_say_why():
    step_callback = config_for().callbacks(on_episode_step=lambda **_: None)
    runner = BatchedEnvRunner(config=step_callback)
    assert "on_episode_step" in why_not_batched(runner) and runner.fallback
    runner.stop()
    rllib_pipelines = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    runner = BatchedEnvRunner(config=rllib_pipelines)
    assert "env-to-module" in runner.fallback
    assert sum(len(episode) for episode in runner.sample(num_timesteps=20)) >= 20  # RLlib's loop samples
    runner.stop()


def test_episodes_of_one_call_keep_rllibs_order():
    # Episodes that end in one call come back by the step they ended at, then by env, as from RLlib's loop.
    config = config_for(episodes_to_numpy=False)
    expected, actual = (
        sample_with(runner_class, config, sizes=(400,))[0][0]
        for runner_class in (SingleAgentEnvRunner, BatchedEnvRunner)
    )
    lengths = lambda episodes: [(len(episode), episode.is_done) for episode in episodes]
    assert lengths(expected) == lengths(actual) and len(np.unique([len(e) for e in expected])) > 3


@pytest.mark.slow
def test_a_remote_batched_runner_trains_as_rllibs_does(tmp_path, monkeypatch):
    # One PPO iteration with the EnvRunner in its own Ray actor: the batched loop runs there (no fallback) and
    # the numpy episodes it ships give the Learner what RLlib's runner gives it, number for number.
    import ray
    import ray.tune.trainable.trainable

    # An Algorithm logs under ~/ray_results, read-only in Bazel's sandbox; Ray 2.56 reads this module global.
    monkeypatch.setattr(ray.tune.trainable.trainable, "DEFAULT_STORAGE_PATH", str(tmp_path))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        results = []
        for runner_class in (SingleAgentEnvRunner, BatchedEnvRunner):
            config = (
                config_for(model_config=LSTM)
                .env_runners(num_env_runners=1, env_runner_cls=runner_class)
                .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=1)
            )
            algo = config.build_algo()
            try:
                result = algo.train()
                kinds = algo.env_runner_group.foreach_env_runner(
                    lambda runner: (type(runner).__name__, getattr(runner, "fallback", None)), local_env_runner=False
                )
                assert kinds == [(runner_class.__name__, None)]
                learner = result["learners"][DEFAULT_MODULE_ID]
                results.append(
                    (
                        result["env_runners"]["num_env_steps_sampled_lifetime"],
                        result["env_runners"]["episode_return_mean"],
                        learner["policy_loss"],
                        learner["vf_loss"],
                    )
                )
            finally:
                algo.stop()
        assert results[0] == results[1]
    finally:
        ray.shutdown()
