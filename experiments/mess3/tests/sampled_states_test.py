"""The main job's Learner builds the same batch when its EnvRunner keeps only the chunk starts' recurrent states."""

import copy

import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from experiments.mess3.task import controlled_mess3 as task
from rl.harness.tests.episodes import assert_equal_nests
from rl.harness.training import batched_env_runner, configs, in_process

# Calls that cut episodes (64 steps) mid-way and mid-chunk (16 steps), so chunks continue across calls.
SAMPLES = (1000, 1000, 296)


def _batches(config, learner) -> list[dict]:
    """The Learner connector's batch from each sample() call's episodes, the runner's module seeded alike."""
    torch.manual_seed(0)
    runner = batched_env_runner.BatchedEnvRunner(config=config)
    try:
        assert runner.fallback is None, runner.fallback
        batches, continued = [], []
        for size in SAMPLES:
            episodes = runner.sample(num_timesteps=size)
            kept = any(Columns.STATE_OUT not in episode.extra_model_outputs for episode in episodes)
            continued.append(sum(episode.t_started > 0 for episode in episodes))
            with torch.no_grad():
                batch = learner._learner_connector(
                    rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={}
                )
            batches.append((kept, batch[DEFAULT_MODULE_ID]))
        assert all(continued[1:]), f"the test needs chunks that continue an episode: {continued}"
        return batches
    finally:
        runner.stop()


def test_the_learner_batch_is_the_same_from_chunk_start_states_alone(monkeypatch):
    config = configs.prepare_config(
        task.ppo_config(smoke=True), seed=3, profile=in_process.default_profile(), parallel_envs=8, in_process=True
    )
    assert config.env_runner_cls is batched_env_runner.BatchedEnvRunner
    probe = batched_env_runner.BatchedEnvRunner(config=config)
    learner = config.build_learner(env=probe.env)
    probe.stop()
    chunked = _batches(config, learner)
    monkeypatch.setattr(batched_env_runner, "chunk_start_states_store", lambda _config: None)
    every_step = _batches(config, learner)
    assert [kept for kept, _ in chunked] == [True] * len(SAMPLES)
    assert [kept for kept, _ in every_step] == [False] * len(SAMPLES)
    for call, ((_, expected), (_, actual)) in enumerate(zip(every_step, chunked, strict=True)):
        assert Columns.STATE_IN in expected
        assert_equal_nests(dict(expected), dict(actual), f"call {call}")
