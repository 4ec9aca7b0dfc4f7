"""Train-until-solved loop and result records for the slow learning tests.

record = train_until(config, target_return=450.0, max_env_steps=200_000)
save_record("ppo_mlp_cartpole", record)   # JSON in $TEST_UNDECLARED_OUTPUTS_DIR under Bazel
assert record.reached
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import ray
import ray.tune.trainable.trainable
import torch
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN, NUM_ENV_STEPS_SAMPLED_LIFETIME


@dataclasses.dataclass
class TrainingRecord:
    """What one run reached: the last mean episode return after each iteration, env steps and wall time."""

    target_return: float
    max_env_steps: int
    reached: bool
    env_steps: int
    seconds: float
    returns: list[float]


@contextlib.contextmanager
def local_ray(results_dir: Path) -> Iterator[None]:
    """A small local Ray for one test module; Algorithms log under `results_dir`.

    RLlib would start a Ray sized to the machine, and every Algorithm writes a log
    folder under `~/ray_results`, which is read-only in Bazel's test sandbox. Ray 2.56
    offers no argument for that folder, so the module global its Trainable reads is
    patched here, for the duration of the block only.
    """
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never a running cluster
    try:
        with mock.patch.object(ray.tune.trainable.trainable, "DEFAULT_STORAGE_PATH", str(results_dir)):
            yield
    finally:
        ray.shutdown()


def train_until(
    config: AlgorithmConfig,
    *,
    target_return: float,
    max_env_steps: int,
    on_result: Callable[[dict], None] | None = None,
) -> TrainingRecord:
    """Builds `config`'s algorithm and trains until the mean episode return reaches `target_return`.

    `on_result`, if given, sees every iteration's result dict (e.g. to check learner metrics).
    """
    torch.set_num_threads(1)
    start = time.monotonic()
    algo = config.build_algo()
    returns: list[float] = []
    env_steps = 0
    try:
        while env_steps < max_env_steps:
            result = algo.train()
            if on_result is not None:
                on_result(result)
            env_steps = int(result[NUM_ENV_STEPS_SAMPLED_LIFETIME])
            episode_return = result[ENV_RUNNER_RESULTS].get(EPISODE_RETURN_MEAN)
            if episode_return is None:  # no episode has finished yet
                continue
            returns.append(round(float(episode_return), 3))
            if episode_return >= target_return:
                break
    finally:
        algo.stop()
    reached = bool(returns) and returns[-1] >= target_return
    return TrainingRecord(target_return, max_env_steps, reached, env_steps, round(time.monotonic() - start, 1), returns)


def save_record(name: str, record: TrainingRecord) -> None:
    """Prints the record and, under Bazel, writes it atomically to the test's undeclared outputs."""
    text = json.dumps({name: dataclasses.asdict(record)}, indent=1)
    print(text)
    folder = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if folder:
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as handle:
            handle.write(text)
        os.replace(handle.name, os.path.join(folder, f"{name}.json"))
