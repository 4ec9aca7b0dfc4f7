"""Learner throughput of our modules vs RLlib's default PPO module and vs a plain PyTorch update; Transformer rollout cost.

    bazel run //rl/learners:bench_learners      # prints one JSON object

`learner_update`: env steps per second through `Learner.update` (learner connector,
GAE and `num_epochs` passes of minibatch SGD) on one batch of CartPole episodes
sampled once and copied for every update, so every module trains on the same data.
`ratio_to_rllib_default` compares with RLlib's DefaultPPOTorchRLModule (its default
model config: separate 256x256 tanh encoders); `parameters` counts each module's
trainable parameters (the transformer, 101k, is within 2x of RLlib's default, 134k).
Besides the bench transformer (d64, 2 blocks, memory 32), two at Mess3's sizes:
`transformer_main_job` (experiments/mess3's main job: d32, 2 heads, 2 blocks, ff 64,
memory 16) and `transformer_seed_size` (the seed project's: d96, 4 heads, 3 blocks,
ff 384, memory 16).
`plain_torch_update`: for each module trained by the PPO loss alone, the same update
written as a plain PyTorch loop (experiments/mess3/benchmarks/torch_reference.py's): the same
module (a copy), loss (`categorical_ppo_loss`), processed batch (the Learner's
connector output, prepared once outside the timing: the plain loop's own GAE over
rollout values costs a few ms) and minibatches (RLlib's number of chunks per
minibatch of the Learner's train batch, which holds the chunks with loss steps, shuffled per epoch),
stepped by `torch.optim.Adam`. `learner_to_plain` is the Learner's samples/s over the
plain loop's, the median of per-round ratios (wall clock; `_cpu`: this process's CPU
seconds, steadier on a shared machine).
`transformer_rollout`: median milliseconds per single-env inference step in windows
at the start, middle and end of a 2048-step episode (memory_len 32); a flat profile
(ratio near 1) shows the step cost does not grow with the episode.
`transformer_inference`: median milliseconds of one vectorised EnvRunner step
(`forward_exploration` / `forward_inference` with a STATE_IN of INFERENCE_BATCH envs).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import time

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import ActorCriticPPOTorchLearner, IQNPPOTorchLearner, QRPPOTorchLearner
from rl.learners.minibatches import map_tensors
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.ppo.loss import categorical_ppo_loss
from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin

BATCH_ENV_STEPS = 4000
MINIBATCH_SIZE = 128
NUM_EPOCHS = 2
TIMED_UPDATES = 5
ROLLOUT_STEPS = 2048
ROLLOUT_WINDOW = 128
ROLLOUT_WARMUP_STEPS = 64
INFERENCE_BATCH = 64
INFERENCE_STEPS = 256
TRANSFORMER = {"d_model": 64, "n_heads": 4, "n_layers": 2, "memory_len": 32, "max_seq_len": 32, "vf_share_layers": True}
# experiments/mess3's main-job model and the seed project's (both max_seq_len 16, as the main job).
TRANSFORMER_MAIN_JOB = {
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 2,
    "feedforward_dim": 64,
    "memory_len": 16,
    "max_seq_len": 16,
    "vf_share_layers": True,
}
TRANSFORMER_SEED_SIZE = {**TRANSFORMER_MAIN_JOB, "d_model": 96, "n_heads": 4, "n_layers": 3, "feedforward_dim": 384}


class IQNMLPModel(IQNValueMixin, MLPModel):
    pass


class QRMLPModel(QRValueMixin, MLPModel):
    pass


# name -> (module class or None for RLlib's default, model_config, learner class or None, learner_config_dict)
MODULES = {
    "rllib_default_ppo": (None, {}, None, {}),
    "mlp_64x64": (MLPModel, {"hidden_sizes": [64, 64]}, ActorCriticPPOTorchLearner, {}),
    "mlp_256x256": (MLPModel, {"hidden_sizes": [256, 256]}, ActorCriticPPOTorchLearner, {}),
    "transformer_d64_l2_mem32": (TransformerModel, TRANSFORMER, ActorCriticPPOTorchLearner, {}),
    "transformer_main_job": (TransformerModel, TRANSFORMER_MAIN_JOB, ActorCriticPPOTorchLearner, {}),
    "transformer_seed_size": (TransformerModel, TRANSFORMER_SEED_SIZE, ActorCriticPPOTorchLearner, {}),
    "iqn_mlp_64x64": (
        IQNMLPModel,
        {"hidden_sizes": [64, 64], "iqn_value": {"train_quantiles": 32, "value_quantiles": 64, "n_cosines": 64}},
        IQNPPOTorchLearner,
        {"iqn_value/loss_coefficient": 0.5},
    ),
    "qr_mlp_64x64": (
        QRMLPModel,
        {"hidden_sizes": [64, 64], "qr_value": {"num_quantiles": 64}},
        QRPPOTorchLearner,
        {"qr_value/loss_coefficient": 0.5},
    ),
}


def ppo_config(module_class=None, model_config=None, learner_class=None, learner_config_dict=None) -> PPOConfig:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(
            train_batch_size_per_learner=BATCH_ENV_STEPS,
            minibatch_size=MINIBATCH_SIZE,
            num_epochs=NUM_EPOCHS,
            vf_loss_coeff=0.0 if learner_config_dict else 1.0,
        )
        .env_runners(num_env_runners=0, num_envs_per_env_runner=8)
    )
    if module_class is not None:
        config.rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))
        config.learners(learner_class=learner_class, learner_config_dict=learner_config_dict)
    return config


def build_learners() -> dict:
    """One Learner per entry of MODULES, by name, built without Ray."""
    return {name: ppo_config(*spec).build_learner(env=gym.make("CartPole-v1")) for name, spec in MODULES.items()}


def parameter_counts(learners: dict) -> dict[str, int]:
    """Trainable parameters of each learner's module."""
    return {
        name: sum(p.numel() for p in learner.module[DEFAULT_MODULE_ID].parameters() if p.requires_grad)
        for name, learner in learners.items()
    }


class LearnerUpdate:
    """`Learner.update` as PPO's training_step calls it, on a fresh copy of the episodes each time.

    Example:
        update = LearnerUpdate(learner, episodes)
        update.prepare()    # untimed: the copy (the connector extends episodes in place)
        update.run()
    """

    def __init__(self, learner, episodes: list):
        self.learner, self.episodes, self._copy = learner, episodes, None

    def prepare(self) -> None:
        self._copy = copy.deepcopy(self.episodes)

    def run(self) -> None:
        # What PPO's training_step passes (Learner.update's defaults are one full-batch step).
        self.learner.update(
            episodes=self._copy, num_epochs=NUM_EPOCHS, minibatch_size=MINIBATCH_SIZE, shuffle_batch_per_epoch=True
        )


class PlainTorchUpdate:
    """A Learner's update as a plain PyTorch loop over a copy of its module (module docstring).

    Example:
        plain = PlainTorchUpdate(learner, episodes)
        plain.run()
    """

    def __init__(self, learner, episodes: list):
        self.module = copy.deepcopy(learner.module[DEFAULT_MODULE_ID])
        self.config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)
        self.optimizer = torch.optim.Adam(self.module.parameters(), lr=self.config.lr)
        training_data = TrainingData(episodes=copy.deepcopy(episodes))
        self.batch = dict(learner._make_batch_if_necessary(training_data).policy_batches[DEFAULT_MODULE_ID])
        chunked = Columns.SEQ_LENS in self.batch
        self.rows = len(self.batch[Columns.SEQ_LENS]) if chunked else len(self.batch[Columns.OBS])
        # The steps RLlib counts (its SampleBatch length) in the Learner's train batch.
        self.steps = int(self.batch[Columns.SEQ_LENS].sum()) if chunked else self.rows

    def prepare(self) -> None:
        """Nothing to do: the batch is ready."""

    def run(self) -> None:
        # RLlib's MiniBatchCyclicIterator: minibatches of rows * MINIBATCH_SIZE / steps rows (chunks),
        # taken in turn from a fresh permutation each epoch.
        rows_per_minibatch = max(1, int(self.rows * MINIBATCH_SIZE / self.steps))
        order = torch.cat([torch.randperm(self.rows) for _ in range(NUM_EPOCHS)])
        for start in range(0, len(order), rows_per_minibatch):
            rows = order[start : start + rows_per_minibatch]
            minibatch = map_tensors(lambda tensor, rows=rows: tensor[rows], self.batch)
            fwd_out = self.module.forward_train(minibatch)
            loss, _ = categorical_ppo_loss(
                self.module,
                minibatch,
                fwd_out,
                config=self.config,
                entropy_coeff=self.config.entropy_coeff,
                kl_coeff=self.config.kl_coeff,
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()


def timed_rounds(updates: dict, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU seconds of each named update's `run()` (after its untimed `prepare()`), `rounds` times.

    One warm-up round first; rounds alternate between the updates, so load from other
    processes affects all alike.
    """
    seconds = {name: {"wall": [], "cpu": []} for name in updates}
    for round_index in range(rounds + 1):  # round 0 warms up
        for name, update in updates.items():
            update.prepare()
            wall, cpu = time.perf_counter(), time.process_time()
            update.run()
            if round_index:
                seconds[name]["wall"].append(time.perf_counter() - wall)
                seconds[name]["cpu"].append(time.process_time() - cpu)
    return seconds


def paired_updates(learners: dict, episodes: list) -> dict:
    """Each Learner's update by name, followed by "plain/<name>" for modules trained by the PPO loss alone.

    A plain update right after its Learner's sees the same load.
    """
    updates = {}
    for name, learner in learners.items():
        updates[name] = LearnerUpdate(learner, episodes)
        if not MODULES[name][3]:  # no extra loss term
            updates[f"plain/{name}"] = PlainTorchUpdate(learner, episodes)
    return updates


def median_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(numerators, denominators))


def inference_transformer() -> TransformerModel:
    """The transformer as an EnvRunner builds it (inference_only), seeded."""
    torch.manual_seed(0)
    return TransformerModel(
        observation_space=gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
        action_space=gym.spaces.Discrete(2),
        inference_only=True,
        model_config=TRANSFORMER,
    )


def transformer_rollout_profile() -> dict:
    """Median milliseconds per single-env inference step in windows at three episode positions."""
    module = inference_transformer()
    observations = torch.randn(ROLLOUT_STEPS, 1, 1, 4)

    def episode_step_seconds(length: int) -> list[float]:
        state, seconds = module.batched_initial_state(1), []
        for obs in observations[:length]:
            start = time.perf_counter()
            state = module.forward_exploration({Columns.OBS: obs, Columns.STATE_IN: state})[Columns.STATE_OUT]
            seconds.append(time.perf_counter() - start)
        return seconds

    episode_step_seconds(ROLLOUT_WARMUP_STEPS)  # first calls allocate
    seconds = episode_step_seconds(ROLLOUT_STEPS)
    windows = {
        f"{start}-{start + ROLLOUT_WINDOW - 1}": 1e3 * statistics.median(seconds[start : start + ROLLOUT_WINDOW])
        for start in (0, ROLLOUT_STEPS // 2, ROLLOUT_STEPS - ROLLOUT_WINDOW)
    }
    first, *_, last = windows.values()
    return {
        "model": TRANSFORMER,
        "step_ms_by_position": {name: round(ms, 4) for name, ms in windows.items()},
        "last_to_first_ratio": round(last / first, 3),
    }


def transformer_inference_profile() -> dict:
    """Median milliseconds per vectorised step of INFERENCE_BATCH envs, exploring and greedy."""
    module = inference_transformer()
    observations = torch.randn(INFERENCE_STEPS, INFERENCE_BATCH, 1, 4)

    def step_ms(forward) -> float:
        state, seconds = module.batched_initial_state(INFERENCE_BATCH), []
        for obs in observations:
            start = time.perf_counter()
            state = forward({Columns.OBS: obs, Columns.STATE_IN: state})[Columns.STATE_OUT]
            seconds.append(time.perf_counter() - start)
        return round(1e3 * statistics.median(seconds[ROLLOUT_WARMUP_STEPS:]), 4)

    return {
        "batch": INFERENCE_BATCH,
        "forward_exploration_step_ms": step_ms(module.forward_exploration),
        "forward_inference_step_ms": step_ms(module.forward_inference),
    }


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    runner = SingleAgentEnvRunner(config=ppo_config().debugging(seed=0))  # the same episodes in every run
    episodes = runner.sample(num_timesteps=BATCH_ENV_STEPS, random_actions=False)
    env_steps = sum(len(episode) for episode in episodes) * NUM_EPOCHS
    learners = build_learners()
    seconds = timed_rounds(paired_updates(learners, episodes), TIMED_UPDATES)
    throughput = {name: env_steps / statistics.median(seconds[name]["wall"]) for name in learners}
    default = throughput["rllib_default_ppo"]
    compared = [name for name in learners if f"plain/{name}" in seconds]
    report = {
        "learner_update": {
            "batch_env_steps": sum(len(episode) for episode in episodes),
            "minibatch_size": MINIBATCH_SIZE,
            "num_epochs": NUM_EPOCHS,
            "torch_threads": torch.get_num_threads(),
            "samples_per_s": {name: round(value, 1) for name, value in throughput.items()},
            "ratio_to_rllib_default": {name: round(value / default, 3) for name, value in throughput.items()},
            "parameters": parameter_counts(learners),
        },
        "plain_torch_update": {
            "samples_per_s": {
                name: round(env_steps / statistics.median(seconds[f"plain/{name}"]["wall"]), 1) for name in compared
            },
            "learner_to_plain": {
                name: round(median_ratio(seconds[f"plain/{name}"]["wall"], seconds[name]["wall"]), 3)
                for name in compared
            },
            "learner_to_plain_cpu": {
                name: round(median_ratio(seconds[f"plain/{name}"]["cpu"], seconds[name]["cpu"]), 3) for name in compared
            },
        },
        "load_average_1min": round(os.getloadavg()[0], 2),
        "transformer_rollout": transformer_rollout_profile(),
        "transformer_inference": transformer_inference_profile(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
