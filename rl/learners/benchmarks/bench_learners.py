"""Learner throughput of our modules vs RLlib's default PPO module, and Transformer rollout cost by position.

    bazel run //rl/learners:bench_learners      # prints one JSON object

`learner_update`: env steps per second through `Learner.update` (learner connector,
GAE and `num_epochs` passes of minibatch SGD) on one batch of CartPole episodes
sampled once and copied for every update, so every module trains on the same data.
`ratio_to_rllib_default` compares with RLlib's DefaultPPOTorchRLModule (its default
model config: separate 256x256 tanh encoders); `parameters` counts each module's
trainable parameters (the transformer, 101k, is within 2x of RLlib's default, 134k).
`transformer_rollout`: median milliseconds per single-env inference step in windows
at the start, middle and end of a 2048-step episode (memory_len 32); a flat profile
(ratio near 1) shows the step cost does not grow with the episode.
`transformer_inference`: median milliseconds of one vectorised EnvRunner step
(`forward_exploration` / `forward_inference` with a STATE_IN of INFERENCE_BATCH envs).
"""

from __future__ import annotations

import copy
import json
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import ActorCriticPPOTorchLearner, IQNPPOTorchLearner, QRPPOTorchLearner
from rl.learners.models import MLPModel, TransformerModel
from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin

BATCH_ENV_STEPS = 4000
MINIBATCH_SIZE = 128
NUM_EPOCHS = 2
TIMED_UPDATES = 3
ROLLOUT_STEPS = 2048
ROLLOUT_WINDOW = 128
ROLLOUT_WARMUP_STEPS = 64
INFERENCE_BATCH = 64
INFERENCE_STEPS = 256
TRANSFORMER = {"d_model": 64, "n_heads": 4, "n_layers": 2, "memory_len": 32, "max_seq_len": 32, "vf_share_layers": True}


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


def learner_throughputs(learners: dict, episodes: list) -> dict[str, float]:
    """Median env steps per second of `Learner.update`, per module, over TIMED_UPDATES rounds.

    Rounds alternate between the modules, so load from other processes affects all alike.
    """
    env_steps = sum(len(episode) for episode in episodes)
    seconds: dict[str, list[float]] = {name: [] for name in learners}
    for round_index in range(TIMED_UPDATES + 1):  # round 0 warms up
        for name, learner in learners.items():
            batch = copy.deepcopy(episodes)  # the connector extends episodes in place
            start = time.perf_counter()
            # What PPO's training_step passes (Learner.update's defaults are one full-batch step).
            learner.update(
                episodes=batch, num_epochs=NUM_EPOCHS, minibatch_size=MINIBATCH_SIZE, shuffle_batch_per_epoch=True
            )
            if round_index:
                seconds[name].append(time.perf_counter() - start)
    return {name: env_steps * NUM_EPOCHS / statistics.median(times) for name, times in seconds.items()}


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
    runner = SingleAgentEnvRunner(config=ppo_config())
    episodes = runner.sample(num_timesteps=BATCH_ENV_STEPS, random_actions=False)
    learners = build_learners()
    throughput = learner_throughputs(learners, episodes)
    default = throughput["rllib_default_ppo"]
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
        "transformer_rollout": transformer_rollout_profile(),
        "transformer_inference": transformer_inference_profile(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
