"""RLlib's train loop with a checkpoint schedule: step 0 (the untrained network) and log-spaced.

    from experiments.common import training

    def run(context):
        config = PPOConfig().environment(...)                  # the recipe's science
        stop = runners.StopRule(env_steps=20_000 if context.smoke else 400_000)
        return training.train_with_schedule(context, config, stop=stop,
                                            checkpoint_at=training.log_spaced(base=2.0))

Like `rl.harness.runners.run_direct` (same records, seeds, hardware profile, progress lines and
resume) except for when it saves: once before the first update (iteration 0, env steps 0:
the randomly initialised network the probes compare against), at every iteration the schedule
names, and at the end. Log-spaced checkpoints resolve the fast early change of the
representation without storing hundreds of late, similar ones.

Why not run_direct: it checkpoints every N iterations only (no step 0, no schedule). This loop
reuses the runner's private helpers (_save, _result_row, _log_progress, _restored_counters)
rather than copying them; see experiments/AGENTS.md ("library gaps").
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from rl.harness import runners
from rl.harness.context import RunContext

Schedule = Callable[[int], bool]


def log_spaced(base: float = 2.0) -> Schedule:
    """Iterations 1, 2, 4, 8, ... (base 2) or 1, 2, 3, 5, 8, 11, 17, ... (base 1.5): round(base**k)."""
    if base <= 1.0:
        raise ValueError(f"base must be > 1 for a log-spaced schedule, got {base}")

    def due(iteration: int) -> bool:
        if iteration < 1:
            return False
        k = round(math.log(iteration, base))
        return any(round(base ** j) == iteration for j in (k - 1, k, k + 1))

    return due


def train_with_schedule(context: RunContext, config, *, stop: runners.StopRule, checkpoint_at: Schedule) -> dict:
    """`algo.train()` until `stop` or a stop signal; checkpoints at 0, where `checkpoint_at` says, and at the end."""
    resume = context.resume
    if resume is not None and resume.checkpoint is None:
        raise ValueError(f"run {resume.parent_run_id} was a Tune run; this recipe resumes from a direct checkpoint")
    config = runners.prepare_config(context, config, context.seeds.integer("rllib"))
    context.recorder.update_manifest(runner={
        "kind": "scheduled", "algorithm": config.algo_class.__name__, "rllib_seed": config.seed,
        "stop": dataclasses.asdict(stop), "checkpoint_schedule": getattr(checkpoint_at, "__qualname__", "custom"),
        "checkpoint_at_step_0": resume is None})
    with runners.ray_cluster(context):
        algo = config.build_algo()
        try:
            if resume is not None:
                algo.restore_from_path(str(resume.checkpoint))
            row = runners._restored_counters(algo)
            if resume is None:
                runners._save(context, algo, 0, 0)
            saved_at = row[runners.ITERATION]
            while not stop.reached(row) and not context.recorder.stop_requested:
                row = context.recorder.log_metrics(runners._result_row(algo.train()))
                runners._log_progress(row)
                if checkpoint_at(row[runners.ITERATION]):
                    runners._save(context, algo, row[runners.ITERATION], row[runners.ENV_STEPS])
                    saved_at = row[runners.ITERATION]
            if saved_at != row[runners.ITERATION]:
                runners._save(context, algo, row[runners.ITERATION], row[runners.ENV_STEPS])
        finally:
            algo.stop()
    return {runners.ITERATION: row[runners.ITERATION], runners.ENV_STEPS: row[runners.ENV_STEPS],
            runners.RETURN: row.get(runners.RETURN)}
