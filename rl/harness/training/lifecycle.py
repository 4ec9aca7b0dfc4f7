"""The one run lifecycle: prepare -> start -> build -> train -> checkpoint -> finish, written once.

Every runner is a `Runner` that says what its phases do; `run(context, runner)` calls them in
order, prepares the runner's configs once (`configs.Preparation`), ends the run at the next phase
boundary when a stop was requested before training (no checkpoint: nothing was trained),
records the runner's manifest section (its runner record) once it is built, and always
finishes what it built.

    for result in lifecycle.run(context, runner):     # what runner.train yields (an agent, a final row)
        ...

    class DirectRunner(lifecycle.Runner):           # runners.py: direct and Tune; agents.py: agents in turn
        def requests(self, context): ...              # its checks (what it resumes), then {name: configs.ConfigRequest}
        def build(self, context, prepared): ...       # prepared configs -> the manifest's runner record
        def train(self, context): ...                 # yields results; AlgorithmTraining does build/train/checkpoint
        def finish(self, context): ...

*prepare* is the lifecycle's, the same for every runner: each requested config's sampling plan
is made and checked with the context's hardware profile before anything starts (a bad
`parallel_envs` fails before Ray), then placed, seeded and given the fast connectors with the
profile `start` yields (`configs.prepare`; planned again only when that profile differs, e.g.
on a cluster), with its runner record's sampling and determinism. `start` is Ray
(`ray_cluster`: local, or the cluster of `--ray-address`) unless a runner trains without it.
One algorithm's phases (build it, restore, train rows, checkpoint on a schedule and at the end,
stop it) are `AlgorithmTraining`, which the direct runner runs once and the agents runner once
per agent; Tune runs them inside its trials.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import gc
import logging as std_logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

import ray
from absl import logging

from rl.harness.errors import HarnessError, UsageError
from rl.harness.run.context import RunContext
from rl.harness.run.machine import HardwareProfile
from rl.harness.run.manifest import RunnerRecord
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, ITERATION_SECONDS, RETURN
from rl.harness.run.rows import RowBudget
from rl.harness.training import cluster, configs, hardware, ray_folders
from rl.harness.training.configs import ConfigRequest, PreparedConfig
from rl.harness.training.reaper import Reaper


class ResumeRefused(UsageError, ValueError):
    """`--resume-from` names something this runner cannot continue from; the message names what to type instead."""


class RestoreFailed(HarnessError):
    """A checkpoint that passed the checks before the run could not be restored: the run fails (exit 1), recorded,
    in one line naming the checkpoint and what to pass instead (the traceback is in traceback.txt)."""


def stopping(context: RunContext, phase: str) -> bool:
    """Whether a stop was requested before training began; says so (the run then ends with no checkpoint)."""
    if context.session.stop_requested:
        logging.warning("stop requested during %s: ending the run before training", phase)
        return True
    return False


class Runner(abc.ABC):
    """What one kind of runner does in each phase of `run`."""

    @abc.abstractmethod
    def requests(self, context: RunContext) -> Mapping[str, ConfigRequest]:
        """The configs it trains, by name (MAIN when one), for the lifecycle to prepare; first the runner's own
        checks that need nothing started (what it resumes), each raising an error that names the fix."""

    def start(self, context: RunContext) -> AbstractContextManager[HardwareProfile]:
        """The compute to train on; yields the profile that places work (Ray, local or a cluster)."""
        return ray_cluster(context)

    @abc.abstractmethod
    def build(self, context: RunContext, prepared: Mapping[str, PreparedConfig]) -> RunnerRecord:
        """Takes its prepared configs (placed, seeded, by the names of `requests`); returns its runner record."""

    @abc.abstractmethod
    def train(self, context: RunContext) -> Iterator[Any]:
        """Trains until the stop rule or a stop request; yields results as they are final."""

    def finish(self, context: RunContext) -> None:
        """Releases what `build` or `train` made; called whenever `build` ran, also on errors."""


MAIN = "main"  # the name of a runner's config when it trains one


def run(context: RunContext, runner: Runner) -> Iterator[Any]:
    """The phases of `runner` in order (module docstring); yields what its `train` yields."""
    preparation = configs.Preparation(context.hardware, runner.requests(context))
    if stopping(context, "start-up"):
        return
    with runner.start(context) as profile:
        if stopping(context, "ray.init"):
            return
        try:
            prepared = preparation.configs_for(profile)
            context.session.record_runner(runner.build(context, prepared))
            yield from runner.train(context)
        finally:
            runner.finish(context)


# -- start: Ray ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _ray_keeps_off_sigterm() -> Iterator[None]:
    """While entered, Ray cannot install its SIGTERM handler: `ray.init` keeps the harness's.

    ray.init (Ray 2.56, `ray._private.worker.init`) first installs a handler that calls
    sys.exit(15) and only then connects, so a SIGTERM while it started ended the run `failed`
    with `SystemExit: 15` instead of `interrupted`. Its helper is Ray's only way in (private,
    hence this one place; tests/runners_phases_test.py fails if Ray installs a handler anyway).
    Running ray.init on another thread instead is no way out: Ray's processes die with the
    thread that started them (PR_SET_PDEATHSIG follows the thread).
    """
    from ray._private import utils as ray_utils

    install = ray_utils.set_sigterm_handler
    ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = install


# The watchdog of the local Ray this process started: its processes die with the driver, even by SIGKILL.
_REAPER: Reaper | None = None


def init_ray(address: str | None, num_cpus: int, kernel_dispatch: dict | None = None) -> None:
    """Attaches to `address`, or starts a local Ray with `num_cpus` (token auth) whose processes end with this
    one (`Reaper`, also on SIGKILL); SIGTERM stays the harness's. End it with `shutdown_ray`.

    "local", not None: without an address ray.init joins whatever cluster $RAY_ADDRESS or
    /tmp/ray/ray_current_cluster names (another test's, another user's `ray start`).
    A local Ray's workers inherit this process's environment (the profile's kernel dispatch with it);
    on an attached cluster's workers, `kernel_dispatch` is set through the job's runtime_env.
    """
    global _REAPER
    with _ray_keeps_off_sigterm():
        if address:
            ray.init(address=address, runtime_env={"env_vars": dict(kernel_dispatch)} if kernel_dispatch else None)
        else:
            cluster.require_token_authentication()
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)
            _REAPER = Reaper.start()


def shutdown_ray() -> None:
    """ray.shutdown(), and the watchdog of a local Ray (`Reaper`) exits with nothing to kill."""
    global _REAPER
    ray.shutdown()
    if _REAPER is not None:
        _REAPER.release()
        _REAPER = None


@contextlib.contextmanager
def ray_cluster(context: RunContext) -> Iterator[HardwareProfile]:
    """Attaches to `context.ray_address` or starts a local Ray sized by the hardware profile.

    Yields the profile that places env runners: the context's, or on a cluster the same with the
    cluster's CPU count. Records the cluster (`cluster.describe`) in the manifest and refuses a
    node whose Ray or Python differs from the driver's before anything is built.
    """
    started = not ray.is_initialized()
    try:
        if started:
            init_ray(context.ray_address, context.hardware.num_cpus, context.hardware.kernel_dispatch)
        context.session.reclaim()  # importing Ray and ray.init raise the root log level
        facts = cluster.describe(context.ray_address, per_node_versions=bool(context.ray_address))
        context.session.record_cluster(facts)
        cluster.check_versions(facts)
        profile = context.hardware
        if context.ray_address:
            profile = hardware.on_cluster(profile, int(ray.cluster_resources().get("CPU", 0)))
        yield profile
    finally:
        if started:
            shutdown_ray()
            # Ray's shutdown hands SIGTERM back to the default action: a SIGTERM in the stages after
            # training (scoring, probing) then killed the run unrecorded (runners_phases_test, "after training").
            context.session.reclaim()


# -- train and checkpoint: one algorithm -----------------------------------------------------------


def result_row(result: dict) -> dict:
    """An Algorithm.train() result as a metrics row (without the config)."""
    return {key: value for key, value in result.items() if key != "config"}


class ProgressLine:
    """The line logged after each training iteration: iteration, budget share and ETA, env steps, return,
    speed, seconds.

        line = ProgressLine(StopRule(env_steps=4096), cap=context.session.budget_cap, start=restored_row)
        logging.info(line.of(row))   # "iter 3 | 75% | ETA 1 s | env steps 3072 | return 12.35 | 768 env steps/s | ..."

    Speed and ETA count only this run's own env steps and seconds (after a resume, RLlib's
    counters go on from the checkpoint while its clock starts at 0). The share is toward the
    nearest bound in force: the recipe's stop rule or the run's --stop-at-* cap. The return is the
    last one an episode gave: iterations in which none ended keep showing it ("-" until the first).
    """

    def __init__(self, stop=None, *, cap: RowBudget | None = None, start: dict | None = None):
        self.stop, self.cap = stop, cap if cap is not None and cap.key is not None else None
        self.start = start or {ITERATION: 0, ENV_STEPS: 0}
        self._start_share = self.share(self.start)
        self._return: float | None = None

    def share(self, row: dict) -> float | None:
        """How far `row` is toward the nearest bound in force, 0 to 1 (None without any bound)."""
        shares = [rule.progress(row) for rule in (self.stop, self.cap) if rule is not None]
        return max(shares) if shares else None

    def of(self, row: dict) -> str:
        episode_return = row.get(RETURN)
        if isinstance(episode_return, (int, float)) and math.isfinite(episode_return):
            self._return = episode_return
        env_steps, total_s = int(row.get(ENV_STEPS) or 0), row.get("time_total_s") or 0.0  # RLlib counts as floats
        own_steps = env_steps - int(self.start.get(ENV_STEPS) or 0)
        parts = [
            f"iter {row.get(ITERATION, 0)}",
            f"env steps {env_steps}",
            f"return {self._return:.2f}" if self._return is not None else "return -",
            f"{own_steps / total_s:.0f} env steps/s" if total_s > 0 else "- env steps/s",
            f"{row.get(ITERATION_SECONDS) or 0.0:.1f} s/iter",
            f"{total_s:.0f} s total",
        ]
        done = self.share(row)
        if done is not None:
            gained = done - (self._start_share or 0.0)
            eta = f"ETA {total_s * (1 - done) / gained:.0f} s" if gained > 0 and total_s > 0 else "ETA -"
            parts[1:1] = [f"{100 * done:.0f}%", eta]
        return " | ".join(parts)


def train_rows(
    context: RunContext, algo, stop, *, row: dict | None = None, trial: str | None = None, tags: dict | None = None
) -> Iterator[dict]:
    """Yields each `algo.train()` result as its logged metrics row until `stop` or a stop signal.

    `row` is where the counters start (a fresh run: iteration 0, env steps 0); `trial` keeps a
    run's curves apart when one recipe trains several algos; `tags` are extra columns of every row.
    """
    row = row or {ITERATION: 0, ENV_STEPS: 0}
    progress = ProgressLine(stop, cap=context.session.budget_cap, start=row)
    prefix = f"{trial} " if trial else ""
    while not stop.reached(row) and not context.session.stop_requested:
        row = context.session.log_metrics({**result_row(algo.train()), **(tags or {})}, trial=trial)
        logging.info("%s%s", prefix, progress.of(row))
        yield row


def env_runner_nodes(algo) -> list[str]:
    """The Ray node id of each remote env runner of `algo` ([] when sampling is local)."""
    group = algo.env_runner_group
    if group is None or group.num_remote_env_runners() == 0:
        return []
    return group.foreach_env_runner(lambda _: ray.get_runtime_context().get_node_id(), local_env_runner=False)


def _restored_counters(algo) -> dict:
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    steps = algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
    return {ITERATION: algo.iteration, ENV_STEPS: int(steps)}


@contextlib.contextmanager
def long_lived_objects_frozen() -> Iterator[None]:
    """While entered, the cyclic garbage collector skips every object that existed on entry.

    A built Algorithm holds ~0.5M tracked objects (modules, Ray, imports) that live as long as
    it does; each full collection walked them all, about 0.03 s per iteration of the main job
    (docs/performance.md). Frozen with the stdlib's `gc.freeze`, they are still freed by
    reference counting, and on exit the collector sees them again. Not for nesting: the
    inner exit would unfreeze the outer's objects too.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


# RLlib's loggers of its EnvRunners (their modules' `logger`s): stopping them after a run lost one (killed, or
# stuck in a step and killed), they log that runner's error at ERROR level, and with `logger.exception` the run's
# own traceback again.
RUNNER_LOGGERS = ("ray.rllib.utils.actor_manager", "ray.rllib.env.env_runner_group")


@contextlib.contextmanager
def _runner_logs_off() -> Iterator[None]:
    """Silences RUNNER_LOGGERS for the block; their levels are restored after it."""
    loggers = [std_logging.getLogger(name) for name in RUNNER_LOGGERS]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(std_logging.CRITICAL + 1)
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@dataclasses.dataclass
class AlgorithmTraining:
    """One prepared AlgorithmConfig's phases: build, restore, train rows, checkpoint on `schedule` and at the end, stop.

    `schedule(iteration)` says which iterations are saved during training (None: only the last);
    `save_initial` also saves the untrained network (iteration 0); `restore_from` is a checkpoint
    folder to continue from; `trial` names this algorithm's line of curves and checkpoints (an
    agent) and `tags` are columns of each of its rows; `on_built(algo)` runs once it is built.
    """

    config: Any
    stop: Any
    schedule: Callable[[int], bool] | None = None
    save_initial: bool = False
    restore_from: Any | None = None
    restore_iteration: int | None = None
    trial: str | None = None
    tags: dict | None = None
    on_built: Callable[[Any], None] | None = None

    def run(self, context: RunContext) -> dict | None:
        """The last row (the counters it stopped at), or None when a stop came before its first iteration."""
        with ray_folders.logs_under(context.artifacts_dir / ray_folders.RAY_LOGS):  # not ~/ray_results
            algo = self.config.build_algo()
        try:
            last = self._train(context, algo)
        except BaseException:
            with _runner_logs_off():  # their logs of the runners a failure lost repeat that failure
                algo.stop()
            raise
        else:
            algo.stop()
            return last
        finally:
            del algo
            gc.collect()  # the stopped algorithm's cycles, before a runner builds the next one (agents in turn)

    def _train(self, context: RunContext, algo) -> dict | None:
        if self.on_built is not None:
            self.on_built(algo)
        if stopping(context, "building the algorithm"):
            return None
        row = {ITERATION: 0, ENV_STEPS: 0}
        if self.restore_from is not None:
            try:
                algo.restore_from_path(str(self.restore_from))
            except Exception as error:
                detail = " ".join(str(error).split())  # one line, whatever the library's message holds
                raise RestoreFailed(
                    f"checkpoint {self.restore_from} could not be restored ({type(error).__name__}"
                    f"{': ' + detail if detail else ''}); pass --resume-from an earlier checkpoint folder of that run (its"
                    " checkpoints/iter_N)"
                ) from error
            row = _restored_counters(algo)
        if self.restore_iteration is not None and row[ITERATION] != self.restore_iteration:
            raise RuntimeError(
                f"restoring {self.restore_from} gave iteration {row[ITERATION]}, but the checkpoint"
                f" was saved at {self.restore_iteration}: the counters would not continue"
            )
        if self.save_initial:
            self._save(context, algo, row)
        started_at = saved_at = row[ITERATION]
        recorder = context.session
        recorder.rolling_restart(self.stop.progress(row), trial=self.trial)
        last = row
        with long_lived_objects_frozen():  # after a restore, whose replaced objects must stay collectable
            for last in train_rows(context, algo, self.stop, row=row, trial=self.trial, tags=self.tags):
                if self.schedule is not None and self.schedule(last[ITERATION]):
                    self._save(context, algo, last)
                    saved_at = last[ITERATION]
                elif not self.stop.reached(last) and recorder.rolling_due(self.stop.progress(last), trial=self.trial):
                    self._save(context, algo, last, rolling=True)
        if saved_at != last[ITERATION]:  # the last iteration, also after a stop request
            self._save(context, algo, last)
        return last if last[ITERATION] != started_at else None

    def _save(self, context: RunContext, algo, row: dict, *, rolling: bool = False) -> None:
        recorder = context.session
        save = recorder.rolling_checkpoint if rolling else recorder.checkpoint
        started = time.perf_counter()
        with save(iteration=int(row[ITERATION]), env_steps=int(row[ENV_STEPS]), trial=self.trial) as folder:
            algo.save_to_path(str(folder))
        recorder.rolling_restart(self.stop.progress(row), trial=self.trial, save_s=time.perf_counter() - started)
