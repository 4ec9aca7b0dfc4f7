"""Runners: RLlib's train loop (direct) and Ray Tune, both writing the harness's records.

    from rl.harness.training import runners

    def run(context):
        config = PPOConfig().environment("CartPole-v1").training(lr=3e-4)   # science: the recipe's
        stop = runners.StopRule(training_iterations=2 if context.smoke else 200)
        return runners.run_direct(context, config, stop=stop, checkpoint_every=10, parallel_envs=32)
        # or: runners.run_direct(..., checkpoint_at=runners.LogSpaced(2.0), checkpoint_initial=True)
        # or: runners.run_tune(context, config, stop=stop, num_seeds=3, checkpoint_every=10)

Both go through the one run lifecycle (lifecycle.py: prepare, start, build, train, checkpoint,
finish), which prepares their configs (configs.py); each says only what is its own: the stop
rule, the checkpoint schedule, Tune. `parallel_envs` is how many envs step together
(the recipe's: it shapes the batch); the hardware profile places them (hardware.SamplingPlan);
without it the harness takes the largest divisor of the train batch up to
configs.DEFAULT_PARALLEL_ENVS. Both apply the hardware profile, seed
RLlib from the named stream "rllib" (Tune: one seed per trial from "tune/trials"), stream every result row to metrics.jsonl as it arrives,
checkpoint every N iterations plus once at the end (also when SIGINT/SIGTERM asked to stop),
and resume with continuous iteration and env-step counters. A stop request before training
(during start-up, `ray.init` or building the algorithm) ends the run at the next phase boundary,
without a checkpoint (nothing was trained). The direct runner also takes a
schedule (`LogSpaced(2.0)`: 1, 2, 4, 8, ...) and a checkpoint of the untrained network at
iteration 0, which representation studies compare against. `context.ray_address` attaches to
an existing cluster (the sampling plan then counts the cluster's CPUs, and the manifest's
`cluster` section records its nodes and where the env runners or trials run); otherwise a local
Ray is started with the profile's CPU count.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import signal
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ray
from absl import logging
from ray import tune
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from rl.harness.run.context import RunContext, check_left_to_do
from rl.harness.run.manifest import DirectRunnerRecord, TuneRunnerRecord
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, RETURN
from rl.harness.training import configs, lifecycle, trial_checkpoints
from rl.harness.training.configs import ConfigRequest, PreparedConfig

TUNE_STORAGE = "tune"
NODE_ID = "node_id"  # the Ray node a Tune trial trained on (a column of its rows)
_TUNE_SEED_STREAM = "tune/trials"


@dataclasses.dataclass(frozen=True)
class Every:
    """A checkpoint schedule: every `iterations`-th training iteration."""

    iterations: int

    def __post_init__(self):
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"checkpoint every N iterations needs an integer N >= 1, got {self.iterations!r}")

    def __call__(self, iteration: int) -> bool:
        return iteration >= 1 and iteration % self.iterations == 0


@dataclasses.dataclass(frozen=True)
class LogSpaced:
    """A checkpoint schedule: iterations round(base**k), e.g. 1, 2, 4, 8, ... (base 2) or 1, 2, 3, 5, 8, 11, 17, ... (1.5).

    Dense where the network changes fast (early), sparse later: a few dozen checkpoints
    cover a long run.
    """

    base: float = 2.0

    def __post_init__(self):
        if not self.base > 1.0:
            raise ValueError(f"a log-spaced checkpoint schedule needs base > 1, got {self.base!r}")

    def __call__(self, iteration: int) -> bool:
        if iteration < 1:
            return False
        k = round(math.log(iteration, self.base))
        return any(round(self.base**j) == iteration for j in (k - 1, k, k + 1))


def _describe(schedule) -> dict:
    if dataclasses.is_dataclass(schedule):
        return {"kind": type(schedule).__name__, **dataclasses.asdict(schedule)}
    return {"kind": "custom", "name": getattr(schedule, "__qualname__", repr(schedule))}


@dataclasses.dataclass(frozen=True)
class StopRule:
    """Stop when any given counter reaches its bound (counters continue across resumes)."""

    training_iterations: int | None = None
    env_steps: int | None = None

    def __post_init__(self):
        bounds = dataclasses.asdict(self).values()
        if all(bound is None for bound in bounds) or any(bound is not None and bound < 1 for bound in bounds):
            raise ValueError(f"{self}: set training_iterations and/or env_steps to a positive bound")

    def reached(self, row: dict) -> bool:
        return any(bound is not None and (row.get(key) or 0) >= bound for key, bound in self._bounds())

    def progress(self, row: dict) -> float:
        """How far `row` is toward the nearest bound, 0 to 1 (what the progress line's percentage shows)."""
        return min(1.0, max((row.get(key) or 0) / bound for key, bound in self._bounds() if bound is not None))

    def _bounds(self):
        return ((ITERATION, self.training_iterations), (ENV_STEPS, self.env_steps))


class DirectRunner(lifecycle.Runner):
    """RLlib's train loop in this driver: one algorithm, checkpointed on a schedule (`run_direct`)."""

    def __init__(
        self,
        config,
        *,
        stop: StopRule,
        schedule: Callable[[int], bool],
        checkpoint_initial: bool,
        parallel_envs: int | None,
    ):
        self.config, self.stop, self.schedule = config, stop, schedule
        self.checkpoint_initial, self.parallel_envs = checkpoint_initial, parallel_envs

    def requests(self, context: RunContext) -> dict[str, ConfigRequest]:
        resume = context.resume
        if resume is not None and resume.checkpoint is None:
            raise lifecycle.ResumeRefused(
                f"run {resume.parent_run_id} was a Tune run; resume it with a recipe that calls run_tune"
            )
        check_left_to_do(context, self.stop)
        return {lifecycle.MAIN: ConfigRequest(self.config, self.parallel_envs, context.seeds.integer("rllib"))}

    def build(self, context: RunContext, prepared: Mapping[str, PreparedConfig]) -> DirectRunnerRecord:
        main = prepared[lifecycle.MAIN]
        self.config = main.config
        return DirectRunnerRecord(
            algorithm=main.algorithm,
            rllib_seed=self.config.seed,
            sampling=main.sampling,
            determinism=main.determinism,
            stop=dataclasses.asdict(self.stop),
            checkpoint_schedule=_describe(self.schedule),
            checkpoint_initial=self.checkpoint_initial and context.resume is None,
        )

    def train(self, context: RunContext) -> Iterator[dict]:
        resume = context.resume
        training = lifecycle.AlgorithmTraining(
            self.config,
            self.stop,
            schedule=self.schedule,
            save_initial=self.checkpoint_initial and resume is None,
            restore_from=resume.checkpoint if resume else None,
            restore_iteration=resume.iteration if resume else None,
            on_built=lambda algo: context.session.record_cluster(
                {"env_runner_nodes": lifecycle.env_runner_nodes(algo)}
            ),
        )
        row = training.run(context)
        if row is not None:
            yield {ITERATION: row[ITERATION], ENV_STEPS: row[ENV_STEPS], RETURN: row.get(RETURN)}


def run_direct(
    context: RunContext,
    config,
    *,
    stop: StopRule,
    checkpoint_every: int | None = None,
    checkpoint_at: Callable[[int], bool] | None = None,
    checkpoint_initial: bool = False,
    parallel_envs: int | None = None,
) -> dict:
    """`algo.train()` until `stop` (or a stop signal); checkpoints on a schedule and at the end.

    The schedule: every `checkpoint_every` iterations (10 when neither is given) or where
    `checkpoint_at(iteration)` is true (`LogSpaced(2.0)`, `Every(5)` or any callable; give one of
    the two). `checkpoint_initial` also saves iteration 0, env steps 0 (the untrained network)
    on a fresh run; a resumed run continues from its checkpoint and saves no iteration 0.
    Returns the counters it stopped at and the last return (the counters it started from,
    return None, when it was stopped before training).
    """
    if checkpoint_every is not None and checkpoint_at is not None:
        raise ValueError(
            "give checkpoint_every or checkpoint_at, not both (checkpoint_at=Every(N) is checkpoint_every=N)"
        )
    schedule = (
        checkpoint_at if checkpoint_at is not None else Every(10 if checkpoint_every is None else checkpoint_every)
    )
    runner = DirectRunner(
        config, stop=stop, schedule=schedule, checkpoint_initial=checkpoint_initial, parallel_envs=parallel_envs
    )
    for outcome in lifecycle.run(context, runner):
        return outcome
    resume = context.resume
    return {ITERATION: resume.iteration if resume else 0, ENV_STEPS: resume.env_steps if resume else 0, RETURN: None}


# -- Tune ------------------------------------------------------------------------------------

# Tune pickles its callbacks and scheduler with the experiment; they find the live session here.
_ACTIVE: dict[str, Any] = {}


class _PauseOnStop(FIFOScheduler):
    """After a stop request (a signal, or a row at the budget cap) each trial's next result is its last.

    Tune pauses the trial there: it saves a checkpoint and trains no further. Before, a trial was
    only asked for a checkpoint and kept training while another trial (still building under
    load) had not reported yet, so it trained past its checkpoint or even finished; the run was
    not interrupted and its last rows were not in any checkpoint. No trial starts after the request.
    """

    def on_trial_result(self, tune_controller, trial, result):
        recorder = _ACTIVE["recorder"]
        if recorder.stop_requested or recorder.budget_cap.reached(result):
            return TrialScheduler.PAUSE
        return super().on_trial_result(tune_controller, trial, result)

    def choose_trial_to_run(self, tune_controller):
        if _ACTIVE["recorder"].stop_requested:
            return None
        return super().choose_trial_to_run(tune_controller)


class _StreamToRecords(tune.Callback):
    """Streams each trial result into metrics.jsonl and each checkpoint into the manifest.

    After a stop request, once no trial is running without its final checkpoint (_PauseOnStop
    pauses each at its next result), it raises Tune's own interrupt (SIGUSR1): Tune then saves
    the experiment with the trials unfinished, so a resumed run continues them from there.
    """

    def on_trial_result(self, iteration, trials, trial, result, **info):
        recorder = _ACTIVE["recorder"]
        row = recorder.log_metrics(lifecycle.result_row(result), trial=trial.trial_id)
        progress = _ACTIVE["progress"].setdefault(
            trial.trial_id, lifecycle.ProgressLine(_ACTIVE.get("stop"), cap=recorder.budget_cap)
        )
        logging.info("trial %s %s", trial.trial_id, progress.of(row))

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        recorder, result = _ACTIVE["recorder"], trial.last_result or {}
        try:  # saved on the disk of the trial's node: the run records (and mirrors) it from this one
            trial_checkpoints.bring_here(checkpoint.path, result.get(NODE_ID))
        except ray.exceptions.RayError as error:  # its node lost meanwhile
            logging.warning("checkpoint %s stayed on its node, unreachable: %s", checkpoint.path, error)
        else:
            recorder.record_checkpoint(
                checkpoint.path,
                iteration=result.get(ITERATION),
                env_steps=result.get(ENV_STEPS),
                trial_id=trial.trial_id,
            )
        if recorder.stop_requested:
            _ACTIVE["saved_after_stop"].add(trial.trial_id)
            self._interrupt_when_all_saved(trials)

    def on_trial_complete(self, iteration, trials, trial, **info):
        if _ACTIVE["recorder"].stop_requested:
            self._interrupt_when_all_saved(trials)

    @staticmethod
    def _interrupt_when_all_saved(trials):
        running = {t.trial_id for t in trials if t.status == "RUNNING"}
        if running <= _ACTIVE["saved_after_stop"] and not _ACTIVE["interrupted"]:
            _ACTIVE["interrupted"] = True
            signal.raise_signal(signal.SIGUSR1)


def _record_node_id(*, result, **_):
    """RLlib on_train_result callback (runs in the trial's process): which node trained this result."""
    result[NODE_ID] = ray.get_runtime_context().get_node_id()


def _for_trials(config):
    """`config` for Tune's trials: their results name their node (after any on_train_result callables of the
    recipe's), and they may save checkpoints on their node's own disk (`trial_checkpoints`)."""
    configs.add_callback(config, "on_train_result", _record_node_id)
    configs.add_callback(config, "on_algorithm_init", trial_checkpoints.mark_storage)
    return config


def _trial_table(result_grid, artifacts_dir) -> list[dict]:
    trials = []
    for result in result_grid:
        metrics = result.metrics or {}
        trials.append(
            {
                "trial_id": metrics.get("trial_id"),
                "seed": (result.config or {}).get("seed"),
                "status": "error" if result.error else "finished" if metrics.get("done") else "unfinished",
                ITERATION: metrics.get(ITERATION),
                ENV_STEPS: metrics.get(ENV_STEPS),
                RETURN: (metrics.get("env_runners") or {}).get("episode_return_mean"),
                NODE_ID: metrics.get(NODE_ID),
                "checkpoint": os.path.relpath(result.checkpoint.path, artifacts_dir) if result.checkpoint else None,
                "error": None if result.error is None else f"{type(result.error).__name__}: {result.error}",
            }
        )
    return sorted(trials, key=lambda trial: str(trial["trial_id"]))


class TuneRunner(lifecycle.Runner):
    """One Ray Tune trial per seed; Tune runs each trial's train loop and checkpoints (`run_tune`)."""

    def __init__(self, config, *, stop: StopRule, num_seeds: int, checkpoint_every: int, parallel_envs: int | None):
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        self.config, self.stop, self.num_seeds = config, stop, num_seeds
        self.checkpoint_every, self.parallel_envs = checkpoint_every, parallel_envs
        self.seeds: list[int] = []

    def requests(self, context: RunContext) -> dict[str, ConfigRequest]:
        resume = context.resume
        if resume is not None and resume.tune_experiment is None:
            raise lifecycle.ResumeRefused(
                "a Tune run resumes from a previous Tune run's id, not from a checkpoint folder: --resume-from <run-id>"
            )
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # SIGINT is the harness's: stop, checkpoint, record
        self.seeds = context.seeds.integers(_TUNE_SEED_STREAM, self.num_seeds)
        return {
            lifecycle.MAIN: ConfigRequest(
                self.config, self.parallel_envs, tune.grid_search(self.seeds), trains=configs.TUNE
            )
        }

    def build(self, context: RunContext, prepared: Mapping[str, PreparedConfig]) -> TuneRunnerRecord:
        main = prepared[lifecycle.MAIN]
        self.config = _for_trials(main.config)
        _ACTIVE.update(recorder=context.session, stop=self.stop, saved_after_stop=set(), interrupted=False, progress={})
        return TuneRunnerRecord(
            algorithm=main.algorithm,
            trial_seeds=tuple(self.seeds),
            storage=TUNE_STORAGE,
            sampling=main.sampling,
            determinism=main.determinism,
            stop=dataclasses.asdict(self.stop),
            checkpoint_every=self.checkpoint_every,
        )

    def train(self, context: RunContext) -> Iterator[dict]:
        storage = os.path.join(str(context.artifacts_dir), TUNE_STORAGE)
        resume = context.resume
        if resume is not None:
            # Tune resumes in place: resume a copy, so the parent's records stay as they were.
            shutil.copytree(resume.tune_experiment, storage)
            tuner = tune.Tuner.restore(
                storage,
                trainable=self.config.algo_class,
                param_space=self.config,
                resume_unfinished=True,
                resume_errored=True,
            )
        else:
            tuner = tune.Tuner(
                self.config.algo_class,
                param_space=self.config,
                tune_config=tune.TuneConfig(scheduler=_PauseOnStop()),
                run_config=tune.RunConfig(
                    name=TUNE_STORAGE,
                    storage_path=str(context.artifacts_dir),
                    stop=tune.stopper.FunctionStopper(lambda trial_id, result: self.stop.reached(result)),
                    checkpoint_config=tune.CheckpointConfig(
                        checkpoint_frequency=self.checkpoint_every, checkpoint_at_end=True
                    ),
                    callbacks=[_StreamToRecords()],
                    verbose=0,
                ),
            )
        trials = _trial_table(tuner.fit(), str(context.artifacts_dir))
        context.session.set_summary_section("trials", trials)
        failed = [trial for trial in trials if trial["status"] == "error"]
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(trials)} Tune trials failed; first: {failed[0]['error']}")
        yield {"trials": len(trials), "seeds": self.seeds}

    def finish(self, context: RunContext) -> None:
        _ACTIVE.clear()


def run_tune(
    context: RunContext,
    config,
    *,
    stop: StopRule,
    num_seeds: int = 1,
    checkpoint_every: int = 10,
    parallel_envs: int | None = None,
) -> dict:
    """One Tune trial per seed (the recipe's search space, if any, multiplies); storage in artifacts/."""
    runner = TuneRunner(
        config, stop=stop, num_seeds=num_seeds, checkpoint_every=checkpoint_every, parallel_envs=parallel_envs
    )
    for outcome in lifecycle.run(context, runner):
        return outcome
    return {"trials": 0, "seeds": runner.seeds}
