"""Preparing a recipe's AlgorithmConfig for a run, in one place: its envs count checked and placed, its seed,
its connectors, and what the manifest records of it.

    from rl.harness.training import configs

    request = configs.ConfigRequest(config, parallel_envs=16, seed=seed)   # what a runner asks for
    plan = configs.plan_sampling(profile, config, parallel_envs=16)         # ParallelEnvsError naming the fix
    prepared = configs.prepare(request, profile, plan)                      # a placed, seeded copy and its records
    prepared.config, prepared.sampling, prepared.determinism

The lifecycle prepares every runner's configs with these, once (`Preparation`): planned
with the context's profile before anything starts, configured with the profile that `start`
yields. `parallel_envs` is the recipe's (it shapes the batch); the hardware profile places them
(hardware.SamplingPlan). Code without a run (benchmarks, process-pool workers) calls
`prepare_config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rl.harness.errors import UsageError
from rl.harness.run.machine import HardwareProfile
from rl.harness.training import episode_metrics, hardware
from rl.harness.training.batched_env_runner import BatchedEnvRunner
from rl.harness.training.hardware import SamplingPlan
from rl.harness.training.sampling_connectors import connector_pipelines, use_fast_connectors

# Batching the policy's forward pass over envs is the main throughput lever (docs/performance.md,
# "Sampling", has the measured env steps/s per envs count); recipes that care set parallel_envs.
DEFAULT_PARALLEL_ENVS = 16
# How a runner's configs train, for the determinism promise (hardware.determinism): "direct" is one
# process in a fixed order, "tune" interleaves trials by timing.
DIRECT, TUNE = "direct", "tune"


class ParallelEnvsError(UsageError, ValueError):
    """A recipe's `parallel_envs` does not fit its train batch; the message names the fix."""


def default_parallel_envs(train_batch: int) -> int:
    """The largest divisor of `train_batch` up to DEFAULT_PARALLEL_ENVS (what a recipe without a choice gets)."""
    return max(count for count in range(1, min(DEFAULT_PARALLEL_ENVS, train_batch) + 1) if train_batch % count == 0)


def plan_sampling(
    profile: HardwareProfile, config, parallel_envs: int | None = None, *, in_process: bool = False
) -> SamplingPlan:
    """Where `parallel_envs` envs step for `config` (an AlgorithmConfig): the one check of a recipe's envs count.

    None takes the largest divisor of the train batch up to DEFAULT_PARALLEL_ENVS. Each update
    then holds exactly the recipe's train batch: every env steps batch / parallel_envs times.
    `profile` places them (on a cluster `lifecycle.ray_cluster` yields one), in remote runners when the
    config is pipelined (`hardware.PIPELINED`); `in_process` puts them all in this process's EnvRunner
    (the in-process runner). ParallelEnvsError names the fix.
    """
    batch = config.total_train_batch_size
    if parallel_envs is None:
        parallel_envs = default_parallel_envs(batch)
    if not isinstance(parallel_envs, int) or isinstance(parallel_envs, bool) or parallel_envs < 1:
        raise ParallelEnvsError(f"parallel_envs must be an integer >= 1, got {parallel_envs!r}")
    if parallel_envs > batch:
        raise ParallelEnvsError(
            f"parallel_envs={parallel_envs} is more than the train batch of {batch} env steps"
            f" allows: every env must step at least once per update; use parallel_envs <= {batch}"
        )
    if batch % parallel_envs:
        raise ParallelEnvsError(
            f"the train batch ({batch} env steps) is not a multiple of parallel_envs={parallel_envs}:"
            f" RLlib would sample {-(-batch // parallel_envs) * parallel_envs} steps per update"
            f" instead; pick parallel_envs dividing {batch}"
        )
    pipelined = bool(getattr(config, hardware.PIPELINED, False))
    if in_process:
        if pipelined:
            raise ParallelEnvsError(
                "the in-process runner samples in this process: a pipelined config needs remote"
                " EnvRunners; train it with run_direct"
            )
        return hardware.in_process_plan(parallel_envs)
    return hardware.place_envs(profile, parallel_envs, pipelined=pipelined)


def add_callback(config, event: str, function) -> None:
    """Adds `function` once to `config`'s callables for RLlib's `event` ("on_train_result"), after the recipe's."""
    existing = getattr(config, f"callbacks_{event}")
    existing = [] if existing is None else list(existing) if isinstance(existing, (list, tuple)) else [existing]
    if function not in existing:
        config.callbacks(**{event: [*existing, function]})


def sampling_record(plan: SamplingPlan, config) -> dict:
    """The manifest's `runner.sampling`: the plan, which EnvRunner connector pipelines `config` (configured)
    runs, and whether its EnvRunners numpy'ize the episodes they return."""
    return {
        **plan.as_dict(),
        "env_runner": env_runner_name(config),
        "connectors": connector_pipelines(config),
        "episodes_to_numpy": config.episodes_to_numpy,
    }


def env_runner_name(config) -> str:
    """Which EnvRunner `config` (configured) samples with: hardware.BATCHED_ENV_RUNNER, RLLIB_ENV_RUNNER (RLlib's
    default for the config) or the recipe's own class's name."""
    if config.env_runner_cls is None:
        return hardware.RLLIB_ENV_RUNNER
    return hardware.BATCHED_ENV_RUNNER if config.env_runner_cls is BatchedEnvRunner else config.env_runner_cls.__name__


@dataclasses.dataclass(frozen=True)
class ConfigRequest:
    """One config a runner trains: the recipe's AlgorithmConfig, its envs count (None: the default), RLlib's
    seed (an integer, or Tune's grid of trial seeds), how it trains (DIRECT or TUNE, for the determinism
    promise) and whether every env steps in this process (the in-process runner)."""

    config: Any
    parallel_envs: int | None
    seed: Any
    trains: str = DIRECT
    in_process: bool = False

    def plan(self, profile: HardwareProfile) -> SamplingPlan:
        return plan_sampling(profile, self.config, self.parallel_envs, in_process=self.in_process)


@dataclasses.dataclass(frozen=True)
class PreparedConfig:
    """A config ready to train (placed, seeded, connectors installed) and what the runner record says of it."""

    config: Any
    profile: HardwareProfile  # what placed it
    plan: SamplingPlan
    sampling: dict  # the runner record's `sampling` (sampling_record)
    determinism: dict  # the runner record's `determinism` (hardware.determinism)

    @property
    def algorithm(self) -> str:
        return self.config.algo_class.__name__


def prepare(request: ConfigRequest, profile: HardwareProfile, plan: SamplingPlan | None = None) -> PreparedConfig:
    """A copy of `request`'s config placed by `profile` (as `plan` says, if given), with RLlib's seed, and its records.

    The one place the harness writes placement and seed into a config; single-agent configs also
    get the fast EnvRunner connector pipelines (sampling_connectors.py), each unless the config
    adds pieces of its own to it, and episode metrics that count the env's steps
    (episode_metrics.py); a local EnvRunner feeding a local Learner returns its episodes without
    numpy'izing them.
    """
    plan = plan or request.plan(profile)
    determinism = hardware.determinism(profile, plan, request.trains)
    config = hardware.apply_to(profile, request.config.copy(copy_frozen=False), plan)
    use_fast_connectors(config)
    if not config.is_multi_agent:
        add_callback(config, episode_metrics.ON_SAMPLE_END, episode_metrics.copy_cut_chunks)
        if profile.env_runner == hardware.BATCHED_ENV_RUNNER and config.env_runner_cls is None:
            config.env_runners(env_runner_cls=BatchedEnvRunner)
    if plan.num_env_runners == 0 and config.num_learners == 0 and config.env_runner_cls is not BatchedEnvRunner:
        # RLlib's local EnvRunner hands its episodes to the local Learner, whose connector batches
        # them anyway: numpy'izing each one first, step by step, cost the main job about 5 %
        # end to end (docs/performance.md). Episodes that travel (remote runners or Learners)
        # stay numpy: arrays pickle smaller than lists of per-step items. The batched EnvRunner
        # builds numpy episodes from its step arrays directly.
        config.env_runners(episodes_to_numpy=False)
    config = config.debugging(seed=request.seed)
    return PreparedConfig(
        config=config, profile=profile, plan=plan, sampling=sampling_record(plan, config), determinism=determinism
    )


class Preparation:
    """A runner's configs prepared once: planned with the context's profile now, so a bad `parallel_envs`
    fails before anything starts; placed and seeded by `configs_for` with the profile `start` yields,
    reusing the plans unless that profile differs (a cluster's).

        preparation = Preparation(context.hardware, {"main": ConfigRequest(config, 16, seed)})
        prepared = preparation.configs_for(profile)["main"]
    """

    def __init__(self, profile: HardwareProfile, requests: Mapping[str, ConfigRequest]):
        self.profile, self.requests = profile, dict(requests)
        self.plans = {name: request.plan(profile) for name, request in self.requests.items()}

    def configs_for(self, profile: HardwareProfile) -> dict[str, PreparedConfig]:
        plans = self.plans if profile == self.profile else {}
        return {name: prepare(request, profile, plans.get(name)) for name, request in self.requests.items()}


def prepare_config(
    config, *, seed, profile: HardwareProfile, parallel_envs: int | None = None, in_process: bool = False
):
    """A placed, seeded copy of the recipe's AlgorithmConfig, outside a run's lifecycle (a benchmark, a worker)."""
    return prepare(ConfigRequest(config, parallel_envs, seed, in_process=in_process), profile).config
