"""PPO on the controlled Mess3 task in one process and plain PyTorch: the throughput benchmark's limit.

    import torch
    from experiments.mess3.benchmarks import torch_reference

    torch.set_num_threads(1)                    # as the harness does: one torch thread per process
    result = torch_reference.run(iterations=6, warmup=1, num_envs=64, train_batch=2048, seed=0)
    result["env_steps_per_s"]                   # steady state: the iterations after `warmup`
    result["sample_s"], result["learn_s"]       # seconds per iteration (lists)
    result["episode_return_mean"]               # per iteration: episodes finished in it (nan if none)
    result["env_steps"]                         # all env steps sampled, warmup included

No Algorithm, EnvRunner, Learner or connector: the same TransformerModel (controlled_mess3.MODEL_CONFIG)
and env (controlled_mess3.make_env) as the RLlib job, `num_envs` copies in a SyncVectorEnv, and the same
per-iteration work as RLlib's PPO: sample `train_batch` steps with the recurrent state batched over envs,
GAE with a value bootstrap at truncations and fragment ends, standardised advantages, then `num_epochs`
of shuffled minibatch Adam steps on RLlib's PPO loss (clipped surrogate, clipped value MSE, entropy, and
the adaptive KL penalty) over `max_seq_len` chunks cut at episode starts, zero-padded and masked, with
the recorded state at each chunk start as STATE_IN. Hyper-parameters are read from
controlled_mess3.ppo_config(smoke=False), so they follow the main job. One saving RLlib does not make:
values come from the rollout's embeddings instead of a second pass over the batch (its GAE connector).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from ray.rllib.core.columns import Columns

from experiments.mess3.task import controlled_mess3
from rl.learners.models import ACTOR_ENCODER, TransformerModel


@dataclasses.dataclass
class Rollout:
    """One fragment, env-major: (N, T, ...) per step; `state_in` is each encoder state before the step."""

    obs: torch.Tensor
    actions: torch.Tensor
    logits: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor  # the episode ended with this step (the env was reset after it)
    bootstrap: torch.Tensor  # V(final obs) for a truncation, 0 for a termination or an ongoing episode
    last_values: torch.Tensor  # (N,) V(next obs) to bootstrap the fragment's ongoing episodes
    state_in: dict[str, torch.Tensor]
    episode_returns: list[float]


class Sampler:
    """Steps `num_envs` envs together and carries observations, states and returns across fragments."""

    def __init__(self, module: TransformerModel, num_envs: int, seed: int):
        self.module = module
        # SAME_STEP: a finished env is reset inside step() and its final obs is in info, so every
        # step of the fragment is a real transition (NEXT_STEP would spend a step on the reset).
        self.envs = SyncVectorEnv([controlled_mess3.make_env] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
        obs, _ = self.envs.reset(seed=seed)
        self.obs = torch.as_tensor(obs)
        self.initial = module.batched_initial_state(num_envs)[ACTOR_ENCODER]
        self.state = dict(self.initial)
        self.returns = np.zeros(num_envs)

    def _encode(self, obs: torch.Tensor, state: dict[str, torch.Tensor]):
        embeddings, state_out = self.module.encoder(obs[:, None], state)
        return embeddings[:, 0], state_out

    @torch.inference_mode()
    def sample(self, steps: int) -> Rollout:
        module, num_envs = self.module, self.envs.num_envs
        columns = {name: [] for name in ("obs", "actions", "logits", "values", "rewards", "dones", "bootstrap")}
        states, finished = [], []
        for _ in range(steps):
            states.append(self.state)
            embeddings, state_out = self._encode(self.obs, self.state)
            logits = module.pi(embeddings)
            actions = torch.distributions.Categorical(logits=logits).sample()
            obs, rewards, terminated, truncated, info = self.envs.step(actions.numpy())
            dones = terminated | truncated
            bootstrap = torch.zeros(num_envs)
            if truncated.any():  # the episode goes on past the time limit: bootstrap from its final obs
                rows = np.flatnonzero(truncated)
                final_obs = torch.as_tensor(np.stack(info["final_obs"][rows]))
                final_embeddings, _ = self._encode(final_obs, {k: v[rows] for k, v in state_out.items()})
                bootstrap[rows] = module.values_from_embeddings(final_embeddings)
            self.returns += rewards
            finished.extend(self.returns[dones].tolist())
            self.returns[dones] = 0.0
            # New tensors, not in-place edits: `states` keeps the earlier ones for training.
            reset = torch.as_tensor(dones)
            self.state = {
                k: torch.where(reset.view(-1, *[1] * (v.dim() - 1)), self.initial[k], v) for k, v in state_out.items()
            }
            for name, value in zip(
                columns,
                (
                    self.obs,
                    actions,
                    logits,
                    module.values_from_embeddings(embeddings),
                    torch.as_tensor(rewards, dtype=torch.float32),
                    reset,
                    bootstrap,
                ),
            ):
                columns[name].append(value)
            self.obs = torch.as_tensor(obs)
        last_values = module.values_from_embeddings(self._encode(self.obs, self.state)[0])
        stacked = {name: torch.stack(values, dim=1) for name, values in columns.items()}
        state_in = {k: torch.stack([state[k] for state in states], dim=1) for k in self.state}
        return Rollout(**stacked, last_values=last_values, state_in=state_in, episode_returns=finished)


def advantages(rollout: Rollout, gamma: float, lambda_: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the fragment: (standardised advantages, value targets), both (N, T)."""
    next_values = torch.cat([rollout.values[:, 1:], rollout.last_values[:, None]], dim=1)
    next_values = torch.where(rollout.dones, rollout.bootstrap, next_values)
    deltas = rollout.rewards + gamma * next_values - rollout.values
    carry = (~rollout.dones).float() * gamma * lambda_
    advantage = torch.zeros_like(deltas)
    running = torch.zeros(deltas.shape[0])
    for t in reversed(range(deltas.shape[1])):
        running = deltas[:, t] + carry[:, t] * running
        advantage[:, t] = running
    targets = advantage + rollout.values
    # As RLlib's GAE connector: over the whole batch, population std floored at 1e-4.
    return (advantage - advantage.mean()) / advantage.std(unbiased=False).clamp_min(1e-4), targets


def chunk(rollout: Rollout, columns: dict[str, torch.Tensor], max_seq_len: int) -> dict[str, torch.Tensor]:
    """(N, T, ...) columns -> (C, max_seq_len, ...) chunks starting at the fragment start, at episode
    starts and every max_seq_len steps within an episode, zero-padded; adds "mask" and STATE_IN."""
    num_envs, steps = rollout.dones.shape
    since_start = torch.zeros(num_envs, steps, dtype=torch.long)  # steps since the segment began
    for t in range(1, steps):
        since_start[:, t] = torch.where(rollout.dones[:, t - 1], 0, since_start[:, t - 1] + 1)
    starts = (since_start % max_seq_len == 0).reshape(-1)
    chunk_ids = torch.cumsum(starts.long(), 0) - 1  # env-major, and every env starts a chunk at t=0
    offsets = (since_start % max_seq_len).reshape(-1)
    num_chunks = int(chunk_ids[-1]) + 1

    def pack(column: torch.Tensor) -> torch.Tensor:
        flat = column.reshape(num_envs * steps, *column.shape[2:])
        packed = flat.new_zeros((num_chunks, max_seq_len, *flat.shape[1:]))
        packed[chunk_ids, offsets] = flat
        return packed

    chunks = {name: pack(column) for name, column in columns.items()}
    chunks["mask"] = pack(torch.ones(num_envs, steps, dtype=torch.bool))
    chunks[Columns.STATE_IN] = {
        k: v.reshape(num_envs * steps, *v.shape[2:])[starts] for k, v in rollout.state_in.items()
    }
    return chunks


def ppo_loss(module: TransformerModel, minibatch: dict, hp, kl_coeff: float) -> tuple[torch.Tensor, torch.Tensor]:
    """RLlib's PPO loss (PPOTorchLearner.compute_loss_for_module) on a chunked minibatch; returns (loss, KL)."""
    batch = {Columns.OBS: minibatch["obs"], Columns.STATE_IN: {ACTOR_ENCODER: minibatch[Columns.STATE_IN]}}
    out = module.forward_train(batch)
    values = module.compute_values(batch, embeddings=out[Columns.EMBEDDINGS])
    mask = minibatch["mask"]
    log_probs = F.log_softmax(out[Columns.ACTION_DIST_INPUTS], dim=-1)
    old_log_probs = F.log_softmax(minibatch["logits"], dim=-1)
    actions = minibatch["actions"][..., None]
    ratio = torch.exp(log_probs.gather(-1, actions) - old_log_probs.gather(-1, actions))[..., 0]
    advantage = minibatch["advantages"]
    surrogate = torch.min(advantage * ratio, advantage * ratio.clamp(1 - hp.clip_param, 1 + hp.clip_param))
    value_loss = ((values - minibatch["targets"]) ** 2).clamp(0, hp.vf_clip_param)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    kl = (old_log_probs.exp() * (old_log_probs - log_probs)).sum(-1)[mask].mean()
    loss = (-surrogate + hp.vf_loss_coeff * value_loss - hp.entropy_coeff * entropy)[mask].mean()
    return (loss + kl_coeff * kl if hp.use_kl_loss else loss), kl.detach()


def run(
    iterations: int,
    *,
    warmup: int = 1,
    num_envs: int = 64,
    train_batch: int | None = None,
    minibatch: int | None = None,
    seed: int = 0,
    model_config: dict | None = None,
    before_iteration: Callable[[], None] | None = None,
) -> dict:
    """Trains for `iterations` PPO iterations; see the module docstring for the result's keys.

    `train_batch` and `minibatch` default to controlled_mess3.ppo_config(smoke=False)'s (2048, 256),
    `model_config` to controlled_mess3.MODEL_CONFIG. `before_iteration` runs before each
    iteration, outside its timing (a benchmark's turns between processes).
    """
    model_config = dict(model_config or controlled_mess3.MODEL_CONFIG)
    hp = controlled_mess3.ppo_config(smoke=False)
    train_batch = train_batch or hp.train_batch_size_per_learner
    minibatch = minibatch or hp.minibatch_size
    max_seq_len = model_config["max_seq_len"]
    if train_batch % num_envs:
        raise ValueError(
            f"train_batch ({train_batch}) must be a multiple of num_envs ({num_envs}): every env "
            f"steps train_batch / num_envs times; pick e.g. train_batch={train_batch // num_envs * num_envs}."
        )
    if minibatch % max_seq_len:
        raise ValueError(
            f"minibatch ({minibatch}) must be a multiple of max_seq_len ({max_seq_len}): minibatches "
            f"hold whole chunks; pick e.g. minibatch={max(1, minibatch // max_seq_len) * max_seq_len}."
        )
    if not 0 <= warmup < iterations:
        raise ValueError(
            f"warmup ({warmup}) must be in [0, iterations={iterations}) to leave steady iterations to time."
        )
    torch.manual_seed(seed)
    env = controlled_mess3.make_env()
    module = TransformerModel(
        observation_space=env.observation_space, action_space=env.action_space, model_config=model_config
    )
    optimizer = torch.optim.Adam(module.parameters(), lr=hp.lr)
    sampler = Sampler(module, num_envs, seed)
    kl_coeff = hp.kl_coeff
    result = {"sample_s": [], "learn_s": [], "episode_return_mean": []}
    for _ in range(iterations):
        if before_iteration is not None:
            before_iteration()
        started = time.perf_counter()
        rollout = sampler.sample(train_batch // num_envs)
        sampled = time.perf_counter()
        advantage, targets = advantages(rollout, hp.gamma, hp.lambda_)
        chunks = chunk(
            rollout,
            {
                "obs": rollout.obs,
                "actions": rollout.actions,
                "logits": rollout.logits,
                "advantages": advantage,
                "targets": targets,
            },
            max_seq_len,
        )
        num_chunks = len(chunks["mask"])
        for _ in range(hp.num_epochs):
            for rows in torch.randperm(num_chunks).split(minibatch // max_seq_len):
                loss, kl = ppo_loss(module, {k: _take(v, rows) for k, v in chunks.items()}, hp, kl_coeff)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        # RLlib adapts the KL coefficient once per update from the last minibatch's KL.
        kl_coeff *= 1.5 if kl > 2 * hp.kl_target else 0.5 if kl < 0.5 * hp.kl_target else 1.0
        learned = time.perf_counter()
        result["sample_s"].append(sampled - started)
        result["learn_s"].append(learned - sampled)
        result["episode_return_mean"].append(
            float(np.mean(rollout.episode_returns)) if rollout.episode_returns else float("nan")
        )
    steady_s = sum(result["sample_s"][warmup:]) + sum(result["learn_s"][warmup:])
    result["env_steps_per_s"] = (iterations - warmup) * train_batch / steady_s
    result["env_steps"] = iterations * train_batch
    return result


def _take(value, rows: torch.Tensor):
    return {k: v[rows] for k, v in value.items()} if isinstance(value, dict) else value[rows]
