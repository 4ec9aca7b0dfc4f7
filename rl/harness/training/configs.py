"""Preparing a recipe's AlgorithmConfig for a run, in one place: where its envs step, its seed, its connectors.

    from rl.harness.training import configs

    plan = configs.plan_sampling(context, config, parallel_envs=16)    # ValueError naming the fix
    config = configs.configure(config, context.hardware, plan, seed)   # a placed, seeded copy
    configs.sampling_record(plan, config)                              # the manifest's `runner.sampling`

Every runner (direct, Tune, agents in turn, in-process) prepares its configs here; `parallel_envs`
is the recipe's (it shapes the batch), the hardware profile places them (hardware.SamplingPlan).
"""

from __future__ import annotations

from typing import Optional

from rl.harness.run.context import RunContext
from rl.harness.training import episode_metrics
from rl.harness.training.hardware import HardwareProfile, SamplingPlan
from rl.harness.training.sampling_connectors import connector_pipelines, use_fast_connectors

# Batching the policy's forward pass over envs is the main throughput lever (docs/performance.md,
# "Sampling", has the measured env steps/s per envs count); recipes that care set parallel_envs.
DEFAULT_PARALLEL_ENVS = 16


def default_parallel_envs(train_batch: int) -> int:
    """The largest divisor of `train_batch` up to DEFAULT_PARALLEL_ENVS (what a recipe without a choice gets)."""
    return max(count for count in range(1, min(DEFAULT_PARALLEL_ENVS, train_batch) + 1) if train_batch % count == 0)


def check_parallel_envs(batch: int, parallel_envs: int) -> None:
    """ValueError naming the fix unless every one of `parallel_envs` envs steps equally often in a `batch`."""
    if parallel_envs > batch:
        raise ValueError(f"parallel_envs={parallel_envs} is more than the train batch of {batch} env steps"
                         f" allows: every env must step at least once per update; use parallel_envs <= {batch}")
    if batch % parallel_envs:
        raise ValueError(f"the train batch ({batch} env steps) is not a multiple of parallel_envs={parallel_envs}:"
                         f" RLlib would sample {-(-batch // parallel_envs) * parallel_envs} steps per update"
                         f" instead; pick parallel_envs dividing {batch}")


def plan_sampling(context: RunContext, config, parallel_envs: Optional[int] = None,
                  profile: Optional[HardwareProfile] = None) -> SamplingPlan:
    """Where `parallel_envs` envs step for `config` (an AlgorithmConfig); checks them against its train batch.

    None takes the largest divisor of the train batch up to DEFAULT_PARALLEL_ENVS. Each update
    then holds exactly the recipe's train batch: every env steps batch / parallel_envs times.
    `profile` (default: the context's) places them; on a cluster `lifecycle.ray_cluster` yields one.
    """
    batch = config.total_train_batch_size
    profile = profile or context.hardware
    plan = profile.plan_sampling(default_parallel_envs(batch) if parallel_envs is None else parallel_envs)
    check_parallel_envs(batch, plan.parallel_envs)
    return plan


def configure(config, profile: HardwareProfile, plan: SamplingPlan, seed):
    """A copy of `config` (an AlgorithmConfig) placed by `profile` as `plan` says, with RLlib's seed `seed`.

    The one place the harness writes placement and seed into a config (every runner calls it);
    single-agent configs also get the fast EnvRunner connector pipelines (sampling_connectors.py),
    each unless the config adds pieces of its own to it, and episode metrics that count the env's
    steps (episode_metrics.py); a local EnvRunner feeding a local Learner returns its episodes
    without numpy'izing them.
    """
    config = config.copy(copy_frozen=False)
    profile.apply_to(config, plan)
    use_fast_connectors(config)
    if not config.is_multi_agent:
        add_callback(config, episode_metrics.ON_SAMPLE_END, episode_metrics.copy_cut_chunks)
    if plan.num_env_runners == 0 and config.num_learners == 0:
        # The local EnvRunner hands its episodes to the local Learner, whose connector batches
        # them anyway: numpy'izing each one first, step by step, cost the main job about 5 %
        # end to end (docs/performance.md). Episodes that travel (remote runners or Learners)
        # stay numpy: arrays pickle smaller than lists of per-step items.
        config.env_runners(episodes_to_numpy=False)
    return config.debugging(seed=seed)


def add_callback(config, event: str, function) -> None:
    """Adds `function` once to `config`'s callables for RLlib's `event` ("on_train_result"), after the recipe's."""
    existing = getattr(config, f"callbacks_{event}")
    existing = [] if existing is None else list(existing) if isinstance(existing, (list, tuple)) else [existing]
    if function not in existing:
        config.callbacks(**{event: [*existing, function]})


def prepare_config(context: RunContext, config, seed, *, parallel_envs: Optional[int] = None,
                   profile: Optional[HardwareProfile] = None):
    """A copy of the recipe's AlgorithmConfig with the hardware profile, its sampling plan and `seed`."""
    profile = profile or context.hardware
    return configure(config, profile, plan_sampling(context, config, parallel_envs, profile), seed)


def sampling_record(plan: SamplingPlan, config) -> dict:
    """The manifest's `runner.sampling`: the plan, which EnvRunner connector pipelines `config` (configured)
    runs, and whether its EnvRunners numpy'ize the episodes they return."""
    return {**plan.as_dict(), "connectors": connector_pipelines(config), "episodes_to_numpy": config.episodes_to_numpy}
