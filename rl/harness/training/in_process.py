"""The in-process runner: one Learner and one local EnvRunner in this process, no Ray.

    from rl.harness.training import in_process, runners
    from rl.harness.run.metric_keys import ENV_STEPS, RETURN

    with in_process.Trainer(config, env=gymnasium.make("CartPole-v1"), seed=context.seeds.integer("rllib"),
                            parallel_envs=8, profile=context.hardware) as trainer:
        for update in trainer.train(runners.StopRule(env_steps=100_000)):
            update.row[ENV_STEPS], update.row[RETURN]     # the harness's metric keys
            update.result                                 # what Learner.update returned (a learner's own metrics)

A recipe whose run is one such loop goes through the harness's lifecycle (no Ray started): its rows
land in metrics.jsonl, the manifest's runner section is an `OwnLoopRunnerRecord` of kind "in_process",
and a stop request ends it after the current iteration:

    rows = in_process.run_in_process(context, config, env=make_env(), stop=runners.StopRule(env_steps=100_000),
                                     parallel_envs=8)

For runs that each need a process of their own (a per-run memory figure, several runs at a time
in a process pool), the parent draws the seeds from `context.seeds` and hands each worker its
integer and `context.hardware`; the worker has no RunContext and builds a Trainer from those.

One iteration is what RLlib's Algorithm does for an on-policy learner, without Ray: the local
EnvRunner samples `train_batch_size_per_learner` env steps (exploring; its last vector step may
add a few more), `Learner.update` runs `num_epochs` epochs of shuffled minibatches of
`minibatch_size` over them, and the learner's weights go back to the runner. The row's return is
the runner's mean over its recent episodes (None until one finished), read before the update.

The harness's part, so a caller sets none of it: the config copy gets the seed
(`.debugging(seed=...)`: RLlib's Learner then seeds torch, numpy and random, the EnvRunner its
envs), the sampling plan (all `parallel_envs` in this process's EnvRunner) and the profile's
learner GPU; torch threads come from `hardware.apply_process_settings`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ContextManager

import torch  # noqa: F401 - imported before apply_process_settings, which sets the threads of a loaded torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.metrics import EPISODE_RETURN_MEAN, NUM_ENV_STEPS_SAMPLED_LIFETIME

from rl.harness.run.context import RunContext
from rl.harness.run.machine import HardwareProfile
from rl.harness.run.manifest import OwnLoopRunnerRecord
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, ITERATION_SECONDS, RETURN
from rl.harness.training import configs, hardware, lifecycle
from rl.harness.training.configs import ConfigRequest, PreparedConfig
from rl.harness.training.runners import StopRule

RUNNER_KIND = "in_process"


def default_profile() -> HardwareProfile:
    """The `cpu` profile of this machine: what a Trainer runs with when its caller passes none."""
    return hardware.choose_profile("cpu", hardware.detect_machine())


def scalar(value: Any) -> float:
    """A metric of `Learner.update` or `EnvRunner.get_metrics` as a float (they hold numbers or reduced Stats)."""
    return float(value.peek() if hasattr(value, "peek") else value)


@dataclasses.dataclass(frozen=True)
class Update:
    """One iteration: `row` has the harness's metric keys (ITERATION, ENV_STEPS, RETURN, ITERATION_SECONDS);
    `result` is what `Learner.update` returned ({module id or ALL_MODULES: {metric: value}}; read with `scalar`)."""

    row: dict
    result: dict


class Trainer:
    """A Learner (`config.build_learner`) and a local `SingleAgentEnvRunner`, built now; `train` runs the loop.

    `env` gives the Learner its spaces; the EnvRunner makes its own `parallel_envs` envs from the
    config's environment. `profile` defaults to this machine's cpu profile (`default_profile`).
    Counters continue over several `train` calls.
    """

    def __init__(self, config, *, env, seed: int, parallel_envs: int, profile: HardwareProfile | None = None):
        profile = profile or default_profile()
        self._build(
            configs.prepare_config(config, seed=seed, profile=profile, parallel_envs=parallel_envs, in_process=True),
            env,
            profile,
        )

    @classmethod
    def of_prepared(cls, config, *, env, profile: HardwareProfile) -> Trainer:
        """A Trainer of a config already prepared for it (the lifecycle's `ConfigRequest(..., in_process=True)`)."""
        trainer = cls.__new__(cls)
        trainer._build(config, env, profile)
        return trainer

    def _build(self, config, env, profile: HardwareProfile) -> None:
        self.profile, self.config = profile, config
        hardware.apply_process_settings(profile)
        self.learner = config.build_learner(env=env)
        self.env_runner = SingleAgentEnvRunner(config=config)
        self.row = {ITERATION: 0, ENV_STEPS: 0}

    def train(
        self,
        stop: StopRule,
        *,
        around_update: Callable[[], ContextManager] | None = None,
    ) -> Iterator[Update]:
        """Yields each iteration's Update until `stop` is reached.

        `around_update()` is entered around each `Learner.update` alone (not the sampling or the
        weight sync), for a caller's own measurement of the update, e.g. its memory peak.
        """
        while not stop.reached(self.row):
            started = time.monotonic()
            episodes = self.env_runner.sample(
                num_timesteps=self.config.train_batch_size_per_learner, random_actions=False
            )
            env_steps = self.row[ENV_STEPS] + sum(len(episode) for episode in episodes)
            episode_return = self.env_runner.get_metrics().get(EPISODE_RETURN_MEAN)
            with around_update() if around_update is not None else contextlib.nullcontext():
                result = self.learner.update(
                    episodes=episodes,
                    timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: env_steps},
                    num_epochs=self.config.num_epochs,
                    minibatch_size=self.config.minibatch_size,
                    shuffle_batch_per_epoch=True,
                )
            self.env_runner.module.set_state(self.learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True))
            self.row = {
                ITERATION: self.row[ITERATION] + 1,
                ENV_STEPS: env_steps,
                RETURN: None if episode_return is None else scalar(episode_return),
                ITERATION_SECONDS: time.monotonic() - started,
            }
            yield Update(row=dict(self.row), result=result)

    def stop(self) -> None:
        """Closes the EnvRunner's envs."""
        self.env_runner.stop()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


@dataclasses.dataclass
class InProcessRunner(lifecycle.Runner):
    """A Trainer as one of the lifecycle's runners: local compute (no Ray), rows logged, stop requests honoured."""

    config: Any
    env: Any
    stop: StopRule
    parallel_envs: int
    trainer: Trainer | None = None

    def requests(self, context: RunContext) -> dict[str, ConfigRequest]:
        return {
            lifecycle.MAIN: ConfigRequest(
                self.config, self.parallel_envs, context.seeds.integer("rllib"), in_process=True
            )
        }

    def start(self, context: RunContext) -> ContextManager[HardwareProfile]:
        return contextlib.nullcontext(context.hardware)

    def build(self, context: RunContext, prepared: Mapping[str, PreparedConfig]) -> OwnLoopRunnerRecord:
        main = prepared[lifecycle.MAIN]
        self.trainer = Trainer.of_prepared(main.config, env=self.env, profile=main.profile)
        return OwnLoopRunnerRecord(
            kind=RUNNER_KIND,
            details={
                "algorithm": main.algorithm,
                "rllib_seed": main.config.seed,
                "sampling": main.sampling,
                "determinism": main.determinism,
                "stop": dataclasses.asdict(self.stop),
            },
        )

    def train(self, context: RunContext) -> Iterator[Update]:
        for update in self.trainer.train(self.stop):
            context.session.log_metrics(update.row)
            yield update
            if context.session.stop_requested:  # SIGINT / SIGTERM: end after this iteration's row
                return

    def finish(self, context: RunContext) -> None:
        if self.trainer is not None:
            self.trainer.stop()


def run_in_process(context: RunContext, config, *, env, stop: StopRule, parallel_envs: int) -> list[dict]:
    """Trains `config` in this process through the lifecycle; returns the rows it logged."""
    return [update.row for update in lifecycle.run(context, InProcessRunner(config, env, stop, parallel_envs))]
