"""Tests of the plain-PyTorch PPO reference: it runs, its training pass sees the rollout's inputs, it learns."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv
from ray.rllib.core.columns import Columns

from experiments.mess3.benchmarks import torch_reference
from experiments.mess3.task import controlled_mess3
from rl.learners.models.base import ACTOR_ENCODER

EPISODE_LENGTH = controlled_mess3.ENV_KWARGS["episode_length"]
MAX_SEQ_LEN = controlled_mess3.MODEL_CONFIG["max_seq_len"]


def test_a_tiny_run_reports_throughput_and_returns():
    # 4 envs x 64 steps per iteration: every iteration finishes one episode per env.
    result = torch_reference.run(iterations=2, warmup=1, num_envs=4, train_batch=256, minibatch=64, seed=0)
    assert result["env_steps_per_s"] > 0
    assert result["env_steps"] == 512
    assert len(result["sample_s"]) == len(result["learn_s"]) == 2
    assert all(math.isfinite(value) for value in result["episode_return_mean"])


def test_the_hook_before_each_iteration_runs_outside_its_timing():
    calls = []

    def pause() -> None:  # as a benchmark's turn: another process works meanwhile
        calls.append(time.perf_counter())
        time.sleep(0.5)

    result = torch_reference.run(
        iterations=3, warmup=1, num_envs=4, train_batch=256, minibatch=64, seed=0, before_iteration=pause
    )
    assert len(calls) == 3
    iterations_s = [sample + learn for sample, learn in zip(result["sample_s"], result["learn_s"], strict=True)]
    # Each iteration runs between two pauses, and none of its timing holds a pause.
    assert all(0 < seconds < later - earlier - 0.5 for seconds, earlier, later in zip(iterations_s, calls, calls[1:]))
    assert result["env_steps_per_s"] == pytest.approx(2 * 256 / sum(iterations_s[1:]))


def test_bad_batch_sizes_name_the_fix():
    with pytest.raises(ValueError, match="multiple of num_envs"):
        torch_reference.run(iterations=2, num_envs=3, train_batch=128)
    with pytest.raises(ValueError, match="multiple of max_seq_len"):
        torch_reference.run(iterations=2, num_envs=4, train_batch=128, minibatch=40)


def test_gae_bootstraps_truncations_and_fragment_ends():
    # One env, rewards 1, values 0, gamma = lambda = 0.9 (so gamma * lambda = 0.81); the episode
    # truncates after step 1 with V(final obs) = 2, and the fragment ends with V(next obs) = 0.5.
    ones, zeros = torch.ones(1, 3), torch.zeros(1, 3)
    rollout = torch_reference.Rollout(
        obs=None,
        actions=None,
        logits=None,
        values=zeros,
        rewards=ones,
        dones=torch.tensor([[False, True, False]]),
        bootstrap=torch.tensor([[0.0, 2.0, 0.0]]),
        last_values=torch.tensor([0.5]),
        state_in={},
        episode_returns=[],
    )
    advantages, targets = torch_reference.advantages(rollout, gamma=0.9, lambda_=0.9)
    step2 = 1 + 0.9 * 0.5
    step1 = 1 + 0.9 * 2.0  # no lambda carry across the episode boundary
    step0 = 1 + 0.81 * step1
    torch.testing.assert_close(targets, torch.tensor([[step0, step1, step2]]))
    torch.testing.assert_close(advantages.mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close(advantages.std(unbiased=False), torch.tensor(1.0))


def _module(seed: int):
    module = controlled_mess3.build_random_network(seed)
    # The policy head starts with gain 0.01 (near-zero logits); gain 1 makes a 1e-5 check meaningful.
    torch.nn.init.orthogonal_(module.pi.weight, gain=1.0)
    return module


def test_chunk_states_reproduce_the_rollout():
    module = _module(seed=3)
    sampler = torch_reference.Sampler(module, num_envs=2, seed=3)
    sampler.sample(40)
    # Steps 40..79 of each episode: chunks [0, 16) and [16, 24) (padded) end the episode, [24, 40) starts the next.
    rollout = sampler.sample(40)
    assert rollout.dones[:, 23].all() and rollout.dones.sum() == 2
    chunks = torch_reference.chunk(
        rollout, {"obs": rollout.obs, "logits": rollout.logits, "values": rollout.values}, MAX_SEQ_LEN
    )
    assert chunks["mask"].sum(1).tolist() == [16, 8, 16] * 2

    batch = {Columns.OBS: chunks["obs"], Columns.STATE_IN: {ACTOR_ENCODER: chunks[Columns.STATE_IN]}}
    with torch.no_grad():
        out = module.forward_train(batch)
        values = module.compute_values(batch, embeddings=out[Columns.EMBEDDINGS])
    mask = chunks["mask"]
    torch.testing.assert_close(out[Columns.ACTION_DIST_INPUTS][mask], chunks["logits"][mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(values[mask], chunks["values"][mask], atol=1e-5, rtol=0)

    # Control: the first chunk starts 40 steps into an episode; from the initial state it would differ.
    initial = module.batched_initial_state(1)[ACTOR_ENCODER]
    with torch.no_grad():
        fresh = module.forward_train({Columns.OBS: chunks["obs"][:1], Columns.STATE_IN: {ACTOR_ENCODER: initial}})
    assert (fresh[Columns.ACTION_DIST_INPUTS][0] - chunks["logits"][0]).abs().max() > 1e-3


def _random_policy_return(num_episodes: int, seed: int) -> float:
    envs = SyncVectorEnv([controlled_mess3.make_env] * num_episodes)
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    returns = np.zeros(num_episodes)
    for _ in range(EPISODE_LENGTH):  # episodes truncate after exactly EPISODE_LENGTH steps
        _, rewards, _, _, _ = envs.step(envs.action_space.sample())
        returns += rewards
    return float(returns.mean())


def test_it_learns_on_a_short_budget():
    # About 3 s: 16 iterations of 1024 steps. Always tilting toward the target earns ~54 per episode,
    # a random policy ~11 (per-episode std ~9, so 256 episodes pin its mean to ~0.6).
    random_return = _random_policy_return(num_episodes=256, seed=7)
    result = torch_reference.run(iterations=16, warmup=1, num_envs=16, train_batch=1024, seed=0)
    learned_return = np.mean(result["episode_return_mean"][-4:])
    assert learned_return > random_return + 20, (learned_return, random_return)
