"""The stages every controlled-Mess3 recipe runs: train, score against the references, probe.

    from experiments.mess3 import study

    config = task.ppo_config(smoke=context.smoke, module_class=..., learner_class=...)
    return study.run(context, config, env_steps=..., random_network=lambda seed: task.build_random_network(seed))

Training saves the untrained network (step 0), log-spaced checkpoints and the last one;
`control_scores` evaluates the last and normalises its return and value between the best memoryless
policy (0) and the belief-optimal one (1); `belief_geometry` probes the residual stream of every
checkpoint and of randomly initialised networks (pass `random_network=None` for a module without
a residual stream, e.g. the memoryless MLP agent). What a recipe changes is its config.
"""

from __future__ import annotations

from typing import Callable, Optional

from experiments.mess3 import belief_geometry, control_scores
from experiments.mess3 import controlled_mess3 as task
from rl.harness import runners

RANDOM_NETWORKS = {True: 1, False: 3}
# The main job's budget, shared by the recipes compared with it (memoryless_agent, next_token_aux).
SMOKE_ENV_STEPS = 3 * 1024  # three updates: checkpoints at 0, 1, 2, 3
FULL_ENV_STEPS = 2**20  # 512 updates of 2048: ~6 min of training, ~8 min in all on 2 cores (README.md)


def env_steps(context) -> int:
    """The main job's budget for this run (smoke or full)."""
    return SMOKE_ENV_STEPS if context.smoke else FULL_ENV_STEPS


def train(context, config, *, env_steps: int) -> dict:
    """PPO (or the config's algorithm) with step-0 and log-spaced checkpoints, at the study's parallel envs."""
    return runners.run_direct(context, config, stop=runners.StopRule(env_steps=env_steps),
                              checkpoint_at=runners.LogSpaced(2.0), checkpoint_initial=True,
                              parallel_envs=task.PARALLEL_ENVS)


def run(context, config, *, env_steps: int, random_network: Optional[Callable[[int], object]]) -> dict:
    """All stages; returns the summary outcome (training counters, scores, probe R^2)."""
    outcome = {**train(context, config, env_steps=env_steps), "scores": control_scores.score_run(context)}
    if random_network is not None:
        seeds = context.seeds.integers("random_networks", RANDOM_NETWORKS[context.smoke])
        comparison = belief_geometry.analyse(context, task.probe_plan_for(smoke=context.smoke),
                                             random_networks=[random_network(seed) for seed in seeds])
        outcome.update(random_network_seeds=seeds, probe_r2=belief_geometry.headline(comparison))
    print(f"results: {context.results_dir}")
    return outcome
