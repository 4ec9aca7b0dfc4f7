"""The stages every controlled-Mess3 recipe runs: train, score against the references, probe.

    from experiments.mess3.task import controlled_mess3 as task
    from experiments.mess3.task import stages

    config = task.ppo_config(smoke=context.smoke, module_class=..., learner_class=...)
    return stages.run(context, config, budget=stages.MAIN_JOB, random_network=lambda seed: task.build_random_network(seed))

Training saves the untrained network (step 0), log-spaced checkpoints and the last one;
`control_scores` evaluates the last and normalises its return and value between the best memoryless
policy (0) and the belief-optimal one (1); `belief_geometry` probes the residual stream of every
checkpoint and of randomly initialised networks (pass `random_network=None` for a module without
a residual stream, e.g. the memoryless MLP agent). What a recipe changes is its config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from experiments.mess3.task import belief_geometry, control_scores
from experiments.mess3.task import controlled_mess3 as task
from rl.analysis import PROBE_COMMAND
from rl.analysis.probes import PROCESS_ROLLOUTS, UNIFORM_CONTEXTS
from rl.harness import LogSpaced, Score, StopRule, run_direct


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much a recipe trains (env steps, smoke or full) and how many random networks its probes compare with."""

    smoke_env_steps: int
    full_env_steps: int
    smoke_random_networks: int = 1
    full_random_networks: int = 3

    def env_steps(self, smoke: bool) -> int:
        return self.smoke_env_steps if smoke else self.full_env_steps

    def random_networks(self, smoke: bool) -> int:
        return self.smoke_random_networks if smoke else self.full_random_networks


# The main job's budget, shared by the recipes compared with it (memoryless_agent, next_token_aux).
# Smoke: three updates (checkpoints at 0, 1, 2, 3); full: 512 updates of 2048 (wall times: README.md).
MAIN_JOB = Budget(smoke_env_steps=3 * 1024, full_env_steps=2**20)


# What a study of these recipes reads from each member's outcome (what `run` returns): the last
# checkpoint's normalised value, greedy and sampled (control_scores: 0 = best memoryless,
# 1 = belief-optimal), its normalised episode return and the last training return.
CONTROL_SCORES = (
    Score("normalised value (greedy)", "scores.normalised_value.greedy.mean"),
    Score("normalised value (sampled)", "scores.normalised_value.sampled.mean"),
    Score("normalised episode return (greedy)", "scores.normalised_episode_return.greedy.mean"),
    Score("final training return", "scores.final_training_return.mean"),
)


def block_1_probe_scores(encoder: str | None = None) -> tuple[Score, ...]:
    """The held-out R^2 of the belief in block 1 on each distribution, trained and the random networks' mean.

    `encoder`: the role whose encoder the probe read ("policy_encoder" or "critic_encoder", which
    is the shared encoder where the module has one; belief_geometry.headline); None reads the
    policy encoder's layers under their plain names, as belief_study's scores do.
    """
    scores = []
    for distribution in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS):
        where = distribution.replace("_", " ") + (f", {encoder.replace('_', ' ')}" if encoder else "")
        for which in ("trained", "random_mean"):
            path = ".".join(["probe_r2", distribution, *([encoder] if encoder else []), "residual_1", which])
            scores.append(Score(f"R^2 block 1, {where} ({which.replace('_mean', '')})", path))
    return tuple(scores)


def train(context, config, *, env_steps: int) -> dict:
    """PPO (or the config's algorithm) with step-0 and log-spaced checkpoints, at the task's parallel envs."""
    return run_direct(
        context,
        config,
        stop=StopRule(env_steps=env_steps),
        checkpoint_at=LogSpaced(2.0),
        checkpoint_initial=True,
        parallel_envs=task.PARALLEL_ENVS,
    )


def run(context, config, *, budget: Budget, random_network: Callable[[int], object] | None) -> dict:
    """All stages; returns the summary outcome (training counters, scores, probe R^2)."""
    trained = train(context, config, env_steps=budget.env_steps(context.smoke))
    # Ctrl-C or SIGTERM: end now (minutes of analysis would follow). A --stop-at-* cap is no signal:
    # the run completed at the cap, and its scores and probes are what a screen at that budget is for.
    if context.recorder.stop_signal is not None:
        print(f"stopped after training: scores and probes skipped; {_probe_later(context)}")
        return trained
    try:
        outcome = _analyse(context, config, trained, budget=budget, random_network=random_network)
    except OSError as error:  # e.g. the results folder's disk is full: the checkpoints are intact
        print(f"writing the scores or probes failed ({error.strerror or error}); {_probe_later(context)}", flush=True)
        raise
    print(f"results: {context.results_dir}")
    return outcome


def _probe_later(context) -> str:
    return f"probe the checkpoints later with `{PROBE_COMMAND.format(run_id=context.run_id)}`"


def _analyse(context, config, trained: dict, *, budget: Budget, random_network: Callable[[int], object] | None) -> dict:
    """The stages after training: scores against the references, then the probes."""
    rows = context.metrics()  # read once, for both stages
    outcome = {**trained, "scores": control_scores.score_run(context, rows, config.env_config)}
    if random_network is not None:
        seeds = context.seeds.integers("random_networks", budget.random_networks(context.smoke))
        comparison = belief_geometry.analyse(
            context,
            task.probe_plan_for(smoke=context.smoke),
            random_networks=[random_network(seed) for seed in seeds],
            rows=rows,
        )
        outcome.update(random_network_seeds=seeds, probe_r2=belief_geometry.headline(comparison))
    return outcome
