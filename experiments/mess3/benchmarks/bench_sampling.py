"""Where sampling time goes for the main job: RLlib's EnvRunner, the harness's, and the plain PyTorch loop's sampler.

    bazel run //experiments/mess3:bench_sampling                 # prints one JSON object (~1.5 min)
    bazel run //experiments/mess3:bench_sampling -- --rounds 5   # more alternating rounds

Four samplers of 2048 env steps (the main job's module, env and 32 parallel envs, one torch
thread), built once, then timed in alternating rounds of `--samples` calls each, so that the
machine's hour moves them alike; each figure is the median over rounds, in ms per 2048 env steps:
- `rllib`: RLlib's SingleAgentEnvRunner with RLlib's defaults;
- `harness_rllib_runner`: the config the harness prepares for a local runner (`configs.prepare`:
  rl/harness/training/sampling_connectors.py's pipelines, list episodes) with `--env-runner rllib`;
- `harness`: the same config with the harness's BatchedEnvRunner (the default);
- `plain`: the plain PyTorch loop's sampler (experiments/mess3/benchmarks/torch_reference.py):
  the same module and envs in a Gymnasium SyncVectorEnv, no episodes, no connectors.
`harness_to_plain` is the harness's time over the plain loop's, round by round (the target: <= 1.1).
`parts_ms` splits each EnvRunner's time (module forward, module-to-env, env step, env-to-module;
for the harness also building the episodes), by wrapping those calls (their private names are
RLlib 2.56's; Ray is pinned); `other` is the rest of `sample()`: for RLlib's loop, its per-env
episode steps and callbacks.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time

import torch
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from experiments.mess3.benchmarks import torch_reference
from experiments.mess3.task import controlled_mess3 as task
from rl.harness.training import batched_env_runner, configs, hardware
from rl.learners.models import TransformerModel

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


def build_runner(variant: str) -> SingleAgentEnvRunner:
    config = task.ppo_config(smoke=False)
    if variant == "rllib":
        return SingleAgentEnvRunner(
            config=config.env_runners(num_env_runners=0, num_envs_per_env_runner=task.PARALLEL_ENVS).debugging(seed=0)
        )
    env_runner = hardware.RLLIB_ENV_RUNNER if variant == "harness_rllib_runner" else hardware.BATCHED_ENV_RUNNER
    profile = hardware.choose_profile("cpu", hardware.detect_machine(), env_runner)
    local = hardware.SamplingPlan(task.PARALLEL_ENVS, 0, task.PARALLEL_ENVS, "local", "bench_sampling")
    config = configs.prepare(configs.ConfigRequest(config, task.PARALLEL_ENVS, seed=0), profile, local).config
    runner = (config.env_runner_cls or SingleAgentEnvRunner)(config=config)
    assert not isinstance(runner, batched_env_runner.BatchedEnvRunner) or runner.fallback is None, runner.fallback
    return runner


class _Sampler:
    """One variant: `sample()` takes 2048 env steps; `parts` collects the wrapped calls' seconds."""

    def __init__(self, variant: str):
        self.parts = collections.defaultdict(float)
        if variant == "plain":
            env = task.make_env()
            module = TransformerModel(
                observation_space=env.observation_space,
                action_space=env.action_space,
                model_config=dict(task.MODEL_CONFIG),
            )
            self.plain = torch_reference.Sampler(module, task.PARALLEL_ENVS, seed=0)
            self.sample = lambda: self.plain.sample(STEPS_PER_SAMPLE // task.PARALLEL_ENVS)
            return
        runner = self.runner = build_runner(variant)
        self.sample = lambda: runner.sample(num_timesteps=STEPS_PER_SAMPLE)
        runner.module.forward_exploration = _Timed(runner.module.forward_exploration, "module_forward", self.parts)
        runner._try_env_step = _Timed(runner._try_env_step, "env_step", self.parts)
        if isinstance(runner, batched_env_runner.BatchedEnvRunner):
            [outputs] = runner._module_to_env.connectors
            outputs.batched = _Timed(outputs.batched, "module_to_env", self.parts)
            runner._next_inputs = _Timed(runner._next_inputs, "env_to_module", self.parts)
            runner._episodes = _Timed(runner._episodes, "episodes", self.parts)
        else:
            runner._module_to_env = _Timed(runner._module_to_env, "module_to_env", self.parts)
            runner._env_to_module = _Timed(runner._env_to_module, "env_to_module", self.parts)

    def timed(self, samples: int) -> float:
        """ms per 2048 env steps over `samples` calls."""
        start = time.perf_counter()
        for _ in range(samples):
            self.sample()
        return (time.perf_counter() - start) / samples * 1e3


VARIANTS = ("rllib", "harness_rllib_runner", "harness", "plain")


def measure(rounds: int, samples: int) -> dict:
    samplers = {variant: _Sampler(variant) for variant in VARIANTS}
    for sampler in samplers.values():
        for _ in range(WARMUP_SAMPLES):
            sampler.sample()
        sampler.parts.clear()
    times = {variant: [] for variant in VARIANTS}
    for _ in range(rounds):
        for variant, sampler in samplers.items():
            times[variant].append(sampler.timed(samples))
    figures = {}
    for variant, sampler in samplers.items():
        sample_ms = statistics.median(times[variant])
        figures[variant] = {
            "sample_ms": round(sample_ms, 2),
            "sample_ms_rounds": [round(t, 2) for t in times[variant]],
            "env_steps_per_s": round(STEPS_PER_SAMPLE / sample_ms * 1e3, 1),
        }
        if sampler.parts:
            parts = {name: round(seconds / (rounds * samples) * 1e3, 2) for name, seconds in sampler.parts.items()}
            parts["other"] = round(statistics.mean(times[variant]) - sum(parts.values()), 2)
            figures[variant]["parts_ms"] = parts
    ratios = [harness / plain for harness, plain in zip(times["harness"], times["plain"])]
    figures["harness_to_plain"] = round(statistics.median(ratios), 3)
    figures["harness_to_plain_rounds"] = [round(ratio, 3) for ratio in ratios]
    figures["harness_to_rllib_runner"] = round(
        statistics.median([harness / rllib for harness, rllib in zip(times["harness"], times["harness_rllib_runner"])]),
        3,
    )
    figures["rllib_to_harness"] = round(figures["rllib"]["sample_ms"] / figures["harness"]["sample_ms"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians over them)")
    parser.add_argument("--samples", type=int, default=4, help="sample() calls per variant and round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    figures = {
        "env_steps_per_sample": STEPS_PER_SAMPLE,
        "parallel_envs": task.PARALLEL_ENVS,
        "rounds": args.rounds,
        "samples": args.samples,
        **measure(args.rounds, args.samples),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
