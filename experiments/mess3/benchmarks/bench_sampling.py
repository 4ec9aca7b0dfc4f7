"""Where an EnvRunner's sampling time goes for the main job: RLlib's connector pipelines vs the harness's.

    bazel run //experiments/mess3:bench_sampling        # prints one JSON object

One local `SingleAgentEnvRunner` per variant, the main job's module, env and 32 parallel
envs, one torch thread: `rllib` with RLlib's defaults, `harness` with the config the harness
prepares for a local runner (`configs.configure`: the connector pipelines of
rl/harness/training/sampling_connectors.py, episodes returned as lists). After
warm-up samples, each connector piece and each part of a vectorised step (module forward,
module-to-env, env step, env-to-module) is timed by wrapping it, over `--samples` calls of
`sample(num_timesteps=2048)`; figures are milliseconds per 2048 env steps (64 vectorised
steps). `other` is the rest of `sample()`: RLlib's episode bookkeeping and callbacks.
The wrapped attributes are the EnvRunner's private ones (Ray is pinned to 2.56).
The cyclic garbage collector is off while the pieces are timed (`pieces_ms`), so that a
collection does not land on whichever piece happens to allocate when it triggers; it is
on for `parts_ms` and `sample_ms`, as in a run.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import time

import torch

from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from experiments.mess3.task import controlled_mess3 as task
from rl.harness.training import configs, hardware
from rl.harness.training.sampling_connectors import connector_pipelines

STEPS_PER_SAMPLE = 2048
WARMUP_SAMPLES = 3


class _Timed:
    """Calls `function`, adding its seconds to `totals[name]`."""

    def __init__(self, function, name: str, totals: dict):
        self.function, self.name, self.totals = function, name, totals

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.totals[self.name] += time.perf_counter() - start


def _runner(harness: bool) -> SingleAgentEnvRunner:
    config = task.ppo_config(smoke=False)
    if harness:  # what the harness runs on 2 CPUs: its config preparation with every env in the local runner
        profile = hardware.choose_profile("cpu", hardware.detect_machine())
        local = hardware.SamplingPlan(task.PARALLEL_ENVS, 0, task.PARALLEL_ENVS, "local", "bench_sampling")
        config = configs.configure(config, profile, local, seed=0)
    else:
        config = config.env_runners(num_env_runners=0, num_envs_per_env_runner=task.PARALLEL_ENVS).debugging(seed=0)
    return SingleAgentEnvRunner(config=config)


def _per_sample_ms(totals: dict, samples: int) -> dict:
    return {name: round(seconds / samples * 1e3, 2) for name, seconds in totals.items()}


def measure(harness: bool, samples: int) -> dict:
    runner = _runner(harness)
    pipelines = connector_pipelines(runner.config)
    for _ in range(WARMUP_SAMPLES):
        runner.sample(num_timesteps=STEPS_PER_SAMPLE)
    pieces = collections.defaultdict(float)
    for pipeline in (runner._env_to_module, runner._module_to_env):  # the EnvRunner's pipelines, built by RLlib
        pipeline.connectors = [_Timed(piece, type(piece).__name__, pieces) for piece in pipeline.connectors]
    gc.disable()
    for _ in range(samples):
        runner.sample(num_timesteps=STEPS_PER_SAMPLE)
    gc.enable()
    gc.collect()  # what piled up while it was off, before the parts are timed
    for pipeline in (runner._env_to_module, runner._module_to_env):
        pipeline.connectors = [timed.function for timed in pipeline.connectors]

    parts = collections.defaultdict(float)
    runner.module.forward_exploration = _Timed(runner.module.forward_exploration, "module_forward", parts)
    runner._module_to_env = _Timed(runner._module_to_env, "module_to_env", parts)
    runner._try_env_step = _Timed(runner._try_env_step, "env_step", parts)
    runner._env_to_module = _Timed(runner._env_to_module, "env_to_module", parts)
    start = time.perf_counter()
    for _ in range(samples):
        runner.sample(num_timesteps=STEPS_PER_SAMPLE)
    sample_ms = (time.perf_counter() - start) / samples * 1e3
    parts_ms = _per_sample_ms(parts, samples)
    parts_ms["other"] = round(sample_ms - sum(parts_ms.values()), 2)
    runner.stop()
    del runner
    gc.collect()  # this runner's episodes and module, before the next variant is built
    return {"connectors": pipelines, "pieces_ms": _per_sample_ms(pieces, samples), "parts_ms": parts_ms,
            "sample_ms": round(sample_ms, 2), "env_steps_per_s": round(STEPS_PER_SAMPLE / sample_ms * 1e3, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10, help="timed sample() calls per variant")
    args = parser.parse_args()
    torch.set_num_threads(1)
    figures = {"env_steps_per_sample": STEPS_PER_SAMPLE, "parallel_envs": task.PARALLEL_ENVS,
               "samples": args.samples, "rllib": measure(False, args.samples), "harness": measure(True, args.samples)}
    figures["speedup"] = round(figures["rllib"]["sample_ms"] / figures["harness"]["sample_ms"], 3)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
