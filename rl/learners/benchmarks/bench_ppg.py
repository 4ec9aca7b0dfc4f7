"""PPO vs PPG at the same env-step budget, 3 seeds each, on CartPole-v1 and CueRecall (a memory POMDP).

    bazel run //rl/learners:bench_ppg -- --out /tmp/ppg_bench   # prints one JSON object

Each run is its own process (so its peak RSS is its own): a Learner from
`build_learner` and an in-process EnvRunner, no Ray. PPO is ActorCriticPPOTorchLearner
with RLlib's separate critic encoder (vf_share_layers=False); PPG is PPGTorchLearner with
the detach design (one encoder). Both share every PPO setting. CartPole uses MLPModel /
PPGMLPModel; CueRecall (report a cue shown `delay` steps earlier) uses TransformerModel /
PPGTransformer. Per run: the learning curve (mean return of the EnvRunner's recent episodes
after each iteration), final return, area under the curve (mean of the curve, so in
return units), wall seconds and peak RSS; PPG runs add the auxiliary buffer's bytes per
env step. `--out` receives `bench_ppg.json` and `bench_ppg.png`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import resource
import statistics
import struct
import tempfile
import time
import zlib
from typing import Any

TASKS = {
    # name: env steps, PPO settings, PPG settings, (PPO module, PPG module, model_config)
    "CartPole-v1": {
        "env_steps": 40_000,
        "training": {"lr": 3e-4, "train_batch_size_per_learner": 2000, "minibatch_size": 128, "num_epochs": 6, "entropy_coeff": 0.0},
        "ppg": {"policy_iterations_per_aux": 4, "aux_epochs": 6, "aux_minibatch_size": 512, "aux_lr": 3e-4,
                "beta_clone": 1.0, "aux_value_loss_coeff": 0.01, "aux_true_value_loss_coeff": 0.01},
        "model": "mlp",
        "model_config": {"hidden_sizes": [64, 64]},
    },
    "CueRecall": {
        "env_steps": 24_000,
        "training": {"lr": 1e-3, "train_batch_size_per_learner": 2000, "minibatch_size": 256, "num_epochs": 6,
                     "entropy_coeff": 0.01, "vf_loss_coeff": 0.5},
        # Returns are in [0, 1]: value losses are small, so their coefficients are 1 (the paper's).
        "ppg": {"policy_iterations_per_aux": 4, "aux_epochs": 6, "aux_minibatch_size": 512, "aux_lr": 1e-3,
                "beta_clone": 1.0, "aux_value_loss_coeff": 1.0, "aux_true_value_loss_coeff": 1.0},
        "model": "transformer",
        "model_config": {"d_model": 32, "n_heads": 2, "n_layers": 1, "feedforward_dim": 64, "memory_len": 16,
                         "max_seq_len": 16, "vf_share_layers": True},
    },
}
ALGORITHMS = ("PPO", "PPG")
SEEDS = (0, 1, 2)


def build(task: str, algorithm: str, seed: int) -> tuple[Any, Any]:
    """The config and the env of one run."""
    import gymnasium as gym
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl.learners import ActorCriticPPOTorchLearner, PPGConfig
    from rl.learners.models import MLPModel, PPGAuxiliaryValueHead, PPGMLPModel, TransformerModel
    from rl.learners.tests.cue_recall_env import CueRecallEnv

    class PPGTransformer(PPGAuxiliaryValueHead, TransformerModel):
        pass

    spec = TASKS[task]
    modules = {("mlp", "PPO"): MLPModel, ("mlp", "PPG"): PPGMLPModel,
               ("transformer", "PPO"): TransformerModel, ("transformer", "PPG"): PPGTransformer}
    module_class = modules[spec["model"], algorithm]
    if algorithm == "PPO":
        config = PPOConfig().training(**spec["training"]).learners(learner_class=ActorCriticPPOTorchLearner)
    else:
        config = PPGConfig().training(**spec["training"], **spec["ppg"])
    if task == "CueRecall":
        env_config = {"n_cues": 4, "delay": 8}
        config.environment(CueRecallEnv, env_config=env_config)
        env = CueRecallEnv(env_config)
    else:
        config.environment(task)
        env = gym.make(task)
    config.rl_module(rl_module_spec=RLModuleSpec(module_class=module_class, model_config=spec["model_config"]))
    config.env_runners(num_env_runners=0, num_envs_per_env_runner=8).debugging(seed=seed)
    return config, env


def run(task: str, algorithm: str, seed: int) -> dict[str, Any]:
    """One training run in this process; returns its curve and figures."""
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.rllib.utils.metrics import EPISODE_RETURN_MEAN, NUM_ENV_STEPS_SAMPLED_LIFETIME

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    config, env = build(task, algorithm, seed)
    learner = config.build_learner(env=env)
    runner = SingleAgentEnvRunner(config=config)
    start = time.monotonic()
    env_steps, curve, buffer_bytes_per_step = 0, [], []
    while env_steps < TASKS[task]["env_steps"]:
        episodes = runner.sample(num_timesteps=config.train_batch_size_per_learner, random_actions=False)
        env_steps += sum(len(episode) for episode in episodes)
        metrics = runner.get_metrics()
        episode_return = metrics.get(EPISODE_RETURN_MEAN)
        result = learner.update(
            episodes=episodes,
            timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: env_steps},
            num_epochs=config.num_epochs,
            minibatch_size=config.minibatch_size,
            shuffle_batch_per_epoch=True,
        )
        if algorithm == "PPG":
            cycle = result["__all_modules__"]
            buffer_bytes_per_step.append(cycle["ppg/buffer_bytes"].peek() / max(1.0, cycle["ppg/buffered_env_steps"].peek()))
        runner.module.set_state(learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True))
        if episode_return is not None:
            value = episode_return.peek() if hasattr(episode_return, "peek") else episode_return
            curve.append((env_steps, round(float(value), 4)))
    returns = [value for _, value in curve]
    record = {
        "task": task,
        "algorithm": algorithm,
        "seed": seed,
        "env_steps": env_steps,
        "curve": curve,
        "final_return": returns[-1] if returns else None,
        "area_under_curve": round(statistics.fmean(returns), 4) if returns else None,
        "wall_seconds": round(time.monotonic() - start, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if buffer_bytes_per_step:
        record["aux_buffer_bytes_per_env_step"] = round(statistics.fmean(buffer_bytes_per_step), 1)
    return record


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and spread over seeds of each (task, algorithm)."""
    summary: dict[str, Any] = {}
    for task in TASKS:
        for algorithm in ALGORITHMS:
            group = [run for run in runs if run["task"] == task and run["algorithm"] == algorithm]
            row = {}
            for key in ("final_return", "area_under_curve", "wall_seconds", "peak_rss_mib", "aux_buffer_bytes_per_env_step"):
                values = [run[key] for run in group if run.get(key) is not None]
                if values:
                    row[key] = {"mean": round(statistics.fmean(values), 3), "min": min(values), "max": max(values)}
            summary.setdefault(task, {})[algorithm] = row
    return summary


COLOURS = {"PPO": (31, 119, 180), "PPG": (255, 127, 14)}


def plot(runs: list[dict[str, Any]], path: str) -> None:
    """One panel per task, left to right: return (y, 0 to the task's best) against env steps (x).

    Drawn with numpy and written as PNG by hand: rl/learners may not import matplotlib.
    Blue PPO, orange PPG, one line per seed; a grey frame, no text (docs/ppg.md has the key).
    """
    import numpy as np

    height, width, margin = 240, 360, 12
    panels = []
    for task in TASKS:
        canvas = np.full((height, width, 3), 255, dtype=np.uint8)
        canvas[[margin, height - margin], margin : width - margin] = 160
        canvas[margin : height - margin, [margin, width - margin]] = 160
        task_runs = [run for run in runs if run["task"] == task and run["curve"]]
        top = max(value for run in task_runs for _, value in run["curve"]) or 1.0
        for run in task_runs:
            steps, returns = (np.array(column, dtype=float) for column in zip(*run["curve"]))
            dense_x = np.linspace(0, TASKS[task]["env_steps"], 4 * width)
            dense_y = np.interp(dense_x, steps, returns)
            columns = margin + dense_x / TASKS[task]["env_steps"] * (width - 2 * margin)
            rows = height - margin - np.clip(dense_y / top, 0, 1) * (height - 2 * margin)
            for offset in (0, 1):
                canvas[np.clip(rows.astype(int) + offset, 0, height - 1), np.clip(columns.astype(int), 0, width - 1)] = (
                    COLOURS[run["algorithm"]]
                )
        panels.append(canvas)
    image = np.concatenate(panels, axis=1)
    raw = b"".join(b"\x00" + row.tobytes() for row in image)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, 2, 0, 0, 0)
    with open(path, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def write_atomically(path: str, write: Any) -> None:
    folder = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp" + os.path.splitext(path)[1])
    os.close(handle)
    write(temporary)
    os.replace(temporary, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for bench_ppg.json and bench_ppg.png")
    parser.add_argument("--workers", type=int, default=2, help="runs in parallel (one process each)")
    arguments = parser.parse_args()
    os.makedirs(arguments.out, exist_ok=True)
    jobs = [(task, algorithm, seed) for task in TASKS for algorithm in ALGORITHMS for seed in SEEDS]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(arguments.workers, mp_context=context, max_tasks_per_child=1) as pool:
        runs = list(pool.map(run, *zip(*jobs)))
    report = {"settings": TASKS, "seeds": SEEDS, "summary": summarise(runs), "runs": runs}
    text = json.dumps(report, indent=1)

    def write_json(path: str) -> None:
        with open(path, "w") as handle:
            handle.write(text)

    write_atomically(os.path.join(arguments.out, "bench_ppg.json"), write_json)
    write_atomically(os.path.join(arguments.out, "bench_ppg.png"), lambda path: plot(runs, path))
    print(json.dumps({"summary": report["summary"]}, indent=1))


if __name__ == "__main__":
    main()
