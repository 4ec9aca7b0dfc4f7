"""Runners: RLlib's train loop (direct) and Ray Tune, both writing the harness's records.

    from rl.harness.training import runners

    def run(context):
        config = PPOConfig().environment("CartPole-v1").training(lr=3e-4)   # science: the recipe's
        stop = runners.StopRule(training_iterations=2 if context.smoke else 200)
        return runners.run_direct(context, config, stop=stop, checkpoint_every=10, parallel_envs=32)
        # or: runners.run_direct(..., checkpoint_at=runners.LogSpaced(2.0), checkpoint_initial=True)
        # or: runners.run_tune(context, config, stop=stop, num_seeds=3, checkpoint_every=10)

`parallel_envs` is how many envs step together (the recipe's: it shapes the batch); the
hardware profile places them (hardware.SamplingPlan); without it the harness takes the largest
divisor of the train batch up to DEFAULT_PARALLEL_ENVS. Both apply the hardware profile, seed
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

import contextlib
import dataclasses
import math
import os
import shutil
import signal
from typing import Any, Callable, Iterator, Optional

import ray
from absl import logging
from ray import tune
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from rl.harness.training import cluster, hardware
from rl.harness.run.context import RunContext
from rl.harness.training.hardware import HardwareProfile, SamplingPlan
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, RETURN
from rl.harness.training.sampling_connectors import connector_pipelines, use_fast_connectors

TUNE_STORAGE = "tune"
NODE_ID = "node_id"  # the Ray node a Tune trial trained on (a column of its rows)
# Batching the policy's forward pass over envs is the main throughput lever (on 2 cores 8 envs
# gave 3.9x one env's env steps/s, 32 envs 6.5x: docs/performance.md); recipes that care set parallel_envs.
DEFAULT_PARALLEL_ENVS = 16
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
        return any(round(self.base ** j) == iteration for j in (k - 1, k, k + 1))


def _describe(schedule) -> dict:
    if dataclasses.is_dataclass(schedule):
        return {"kind": type(schedule).__name__, **dataclasses.asdict(schedule)}
    return {"kind": "custom", "name": getattr(schedule, "__qualname__", repr(schedule))}


@dataclasses.dataclass(frozen=True)
class StopRule:
    """Stop when any given counter reaches its bound (counters continue across resumes)."""

    training_iterations: Optional[int] = None
    env_steps: Optional[int] = None

    def __post_init__(self):
        bounds = dataclasses.asdict(self).values()
        if all(bound is None for bound in bounds) or any(bound is not None and bound < 1 for bound in bounds):
            raise ValueError(f"{self}: set training_iterations and/or env_steps to a positive bound")

    def reached(self, row: dict) -> bool:
        return any(bound is not None and (row.get(key) or 0) >= bound for key, bound in self._bounds())

    def _bounds(self):
        return ((ITERATION, self.training_iterations), (ENV_STEPS, self.env_steps))


def default_parallel_envs(train_batch: int) -> int:
    """The largest divisor of `train_batch` up to DEFAULT_PARALLEL_ENVS (what a recipe without a choice gets)."""
    return max(count for count in range(1, min(DEFAULT_PARALLEL_ENVS, train_batch) + 1) if train_batch % count == 0)


def plan_sampling(context: RunContext, config, parallel_envs: Optional[int] = None,
                  profile: Optional[HardwareProfile] = None) -> SamplingPlan:
    """Where `parallel_envs` envs step for `config` (an AlgorithmConfig); checks them against its train batch.

    None takes the largest divisor of the train batch up to DEFAULT_PARALLEL_ENVS. Each update
    then holds exactly the recipe's train batch: every env steps batch / parallel_envs times.
    `profile` (default: the context's) places them; on a cluster `ray_cluster` yields one.
    """
    batch = config.total_train_batch_size
    profile = profile or context.hardware
    plan = profile.plan_sampling(default_parallel_envs(batch) if parallel_envs is None else parallel_envs)
    check_parallel_envs(batch, plan.parallel_envs)
    return plan


def check_parallel_envs(batch: int, parallel_envs: int) -> None:
    """ValueError naming the fix unless every one of `parallel_envs` envs steps equally often in a `batch`."""
    if parallel_envs > batch:
        raise ValueError(f"parallel_envs={parallel_envs} is more than the train batch of {batch} env steps"
                         f" allows: every env must step at least once per update; use parallel_envs <= {batch}")
    if batch % parallel_envs:
        raise ValueError(f"the train batch ({batch} env steps) is not a multiple of parallel_envs={parallel_envs}:"
                         f" RLlib would sample {-(-batch // parallel_envs) * parallel_envs} steps per update"
                         f" instead; pick parallel_envs dividing {batch}")


def prepare_config(context: RunContext, config, seed, *, parallel_envs: Optional[int] = None):
    """A copy of the recipe's AlgorithmConfig with the hardware profile, its sampling plan and `seed`."""
    return _configured(context, config, seed, plan_sampling(context, config, parallel_envs))


def _configured(context: RunContext, config, seed, plan: SamplingPlan):
    return configure(config, context.hardware, plan, seed)


def configure(config, profile: HardwareProfile, plan: SamplingPlan, seed):
    """A copy of `config` (an AlgorithmConfig) placed by `profile` as `plan` says, with RLlib's seed `seed`.

    The one place the harness writes placement and seed into a config (every runner calls it);
    single-agent configs also get the fast EnvRunner connector pipelines (sampling_connectors.py),
    each unless the config adds pieces of its own to it.
    """
    config = config.copy(copy_frozen=False)
    profile.apply_to(config, plan)
    use_fast_connectors(config)
    return config.debugging(seed=seed)


def sampling_record(plan: SamplingPlan, config) -> dict:
    """The manifest's `runner.sampling`: the plan, and which EnvRunner connector pipelines `config` (configured) runs."""
    return {**plan.as_dict(), "connectors": connector_pipelines(config)}


def train_rows(context: RunContext, algo, stop: StopRule, *, row: Optional[dict] = None,
               trial: Optional[str] = None, tags: Optional[dict] = None):
    """Yields each `algo.train()` result as its logged metrics row until `stop` or a stop signal.

    `row` is where the counters start (a fresh run: iteration 0, env steps 0); `trial` keeps a
    run's curves apart when one recipe trains several algos; `tags` are extra columns of every row.

        for row in runners.train_rows(context, algo, stop, trial="ppo", tags={"agent": "ppo"}):
            ...   # e.g. checkpoint on a schedule
    """
    row = row or {ITERATION: 0, ENV_STEPS: 0}
    while not stop.reached(row) and not context.recorder.stop_requested:
        row = context.recorder.log_metrics({**result_row(algo.train()), **(tags or {})}, trial=trial)
        log_progress(row, prefix=f"{trial} " if trial else "")
        yield row


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


def _init_ray(context: RunContext) -> None:
    """Attaches to `context.ray_address`, or starts a local Ray with the profile's CPUs; SIGTERM stays the harness's.

    "local", not None: without an address ray.init joins whatever cluster $RAY_ADDRESS or
    /tmp/ray/ray_current_cluster names (another test's, another user's `ray start`).
    """
    with _ray_keeps_off_sigterm():
        if context.ray_address:
            ray.init(address=context.ray_address)
        else:
            ray.init(address="local", num_cpus=context.hardware.num_cpus, include_dashboard=False)


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
            _init_ray(context)
        context.recorder.reclaim()  # importing Ray and ray.init raise the root log level
        facts = cluster.describe(context.ray_address, per_node_versions=bool(context.ray_address))
        context.recorder.update_manifest(cluster=facts)
        cluster.check_versions(facts)
        profile = context.hardware
        if context.ray_address:
            profile = profile.on_cluster(int(ray.cluster_resources().get("CPU", 0)))
        yield profile
    finally:
        if started:
            ray.shutdown()


def stopping(context: RunContext, phase: str) -> bool:
    """Whether a stop was requested before training began; says so (the run then ends with no checkpoint)."""
    if context.recorder.stop_requested:
        logging.warning("stop requested during %s: ending the run before training", phase)
        return True
    return False


def env_runner_nodes(algo) -> list[str]:
    """The Ray node id of each remote env runner of `algo` ([] when sampling is local)."""
    group = algo.env_runner_group
    if group is None or group.num_remote_env_runners() == 0:
        return []
    return group.foreach_env_runner(lambda _: ray.get_runtime_context().get_node_id(), local_env_runner=False)


def result_row(result: dict) -> dict:
    """An Algorithm.train() result as a metrics row (without the config)."""
    return {key: value for key, value in result.items() if key != "config"}


def log_progress(row: dict, prefix: str = "") -> None:
    """One progress line: iteration, env steps, return, seconds per iteration and in total."""
    episode_return = row.get(RETURN)
    logging.info("%siter %d | env steps %d | return %s | %.1f s/iter | %.0f s total", prefix, row.get(ITERATION, 0),
                 row.get(ENV_STEPS) or 0, "-" if episode_return is None else f"{episode_return:.2f}",
                 row.get("time_this_iter_s") or 0.0, row.get("time_total_s") or 0.0)


def _save(context: RunContext, algo, iteration: int, env_steps: int) -> None:
    with context.recorder.checkpoint(iteration=iteration, env_steps=int(env_steps), runner="direct") as folder:
        algo.save_to_path(str(folder))


def _restored_counters(algo) -> dict:
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    steps = algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
    return {ITERATION: algo.iteration, ENV_STEPS: int(steps)}


def run_direct(context: RunContext, config, *, stop: StopRule, checkpoint_every: Optional[int] = None,
               checkpoint_at: Optional[Callable[[int], bool]] = None, checkpoint_initial: bool = False,
               parallel_envs: Optional[int] = None) -> dict:
    """`algo.train()` until `stop` (or a stop signal); checkpoints on a schedule and at the end.

    The schedule: every `checkpoint_every` iterations (10 when neither is given) or where
    `checkpoint_at(iteration)` is true (`LogSpaced(2.0)`, `Every(5)` or any callable; give one of
    the two). `checkpoint_initial` also saves iteration 0, env steps 0 (the untrained network)
    on a fresh run; a resumed run continues from its checkpoint and saves no iteration 0.
    """
    if checkpoint_every is not None and checkpoint_at is not None:
        raise ValueError("give checkpoint_every or checkpoint_at, not both (checkpoint_at=Every(N) is checkpoint_every=N)")
    schedule = checkpoint_at if checkpoint_at is not None else Every(10 if checkpoint_every is None else checkpoint_every)
    resume = context.resume
    if resume is not None and resume.checkpoint is None:
        raise ValueError(f"run {resume.parent_run_id} was a Tune run; resume it with a recipe that calls run_tune")
    plan_sampling(context, config, parallel_envs)  # a bad parallel_envs fails before Ray starts
    # The counters before training: the outcome of a run stopped before its first iteration.
    row = {ITERATION: resume.iteration if resume else 0, ENV_STEPS: resume.env_steps if resume else 0}
    if stopping(context, "start-up"):
        return {**row, RETURN: None}
    with ray_cluster(context) as profile:
        if stopping(context, "ray.init"):
            return {**row, RETURN: None}
        sampling = plan_sampling(context, config, parallel_envs, profile)
        config = _configured(context, config, context.seeds.integer("rllib"), sampling)
        context.recorder.update_manifest(runner={
            "kind": "direct", "algorithm": config.algo_class.__name__, "rllib_seed": config.seed,
            "sampling": sampling_record(sampling, config), "determinism": hardware.determinism(profile, sampling, "direct"),
            "stop": dataclasses.asdict(stop), "checkpoint_schedule": _describe(schedule),
            "checkpoint_initial": checkpoint_initial and resume is None})
        algo = config.build_algo()
        try:
            context.recorder.update_manifest(
                cluster={**context.recorder.manifest["cluster"], "env_runner_nodes": env_runner_nodes(algo)})
            if stopping(context, "building the algorithm"):
                return {**row, RETURN: None}
            if resume is not None:
                algo.restore_from_path(str(resume.checkpoint))
            row = _restored_counters(algo)
            if resume is not None and resume.iteration is not None and row[ITERATION] != resume.iteration:
                raise RuntimeError(f"restoring {resume.checkpoint} gave iteration {row[ITERATION]}, but the"
                                   f" checkpoint was saved at {resume.iteration}: the counters would not continue")
            saved_at = row[ITERATION]  # a fresh run's untrained network is saved only when asked for
            if checkpoint_initial and resume is None:
                _save(context, algo, 0, 0)
            for row in train_rows(context, algo, stop, row=row):
                if schedule(row[ITERATION]):
                    _save(context, algo, row[ITERATION], row[ENV_STEPS])
                    saved_at = row[ITERATION]
            if saved_at != row[ITERATION]:
                _save(context, algo, row[ITERATION], row[ENV_STEPS])
        finally:
            algo.stop()
    return {ITERATION: row[ITERATION], ENV_STEPS: row[ENV_STEPS], RETURN: row.get(RETURN)}


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
        row = _ACTIVE["recorder"].log_metrics(result_row(result), trial=trial.trial_id)
        log_progress(row, prefix=f"trial {trial.trial_id} ")

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        recorder = _ACTIVE["recorder"]
        result = trial.last_result or {}
        recorder.record_checkpoint(checkpoint.path, iteration=result.get(ITERATION),
                                   env_steps=result.get(ENV_STEPS), trial_id=trial.trial_id)
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


def _with_node_ids(config):
    """`config` whose results name their node, after any on_train_result callables of the recipe's."""
    existing = config.callbacks_on_train_result
    existing = [] if existing is None else list(existing) if isinstance(existing, (list, tuple)) else [existing]
    return config.callbacks(on_train_result=[*existing, _record_node_id])


def _trial_table(result_grid, artifacts_dir) -> list[dict]:
    trials = []
    for result in result_grid:
        metrics = result.metrics or {}
        trials.append({
            "trial_id": metrics.get("trial_id"),
            "seed": (result.config or {}).get("seed"),
            "status": "error" if result.error else "finished" if metrics.get("done") else "unfinished",
            ITERATION: metrics.get(ITERATION),
            ENV_STEPS: metrics.get(ENV_STEPS),
            RETURN: (metrics.get("env_runners") or {}).get("episode_return_mean"),
            NODE_ID: metrics.get(NODE_ID),
            "checkpoint": os.path.relpath(result.checkpoint.path, artifacts_dir) if result.checkpoint else None,
            "error": None if result.error is None else f"{type(result.error).__name__}: {result.error}",
        })
    return sorted(trials, key=lambda trial: str(trial["trial_id"]))


def run_tune(context: RunContext, config, *, stop: StopRule, num_seeds: int = 1, checkpoint_every: int = 10,
             parallel_envs: Optional[int] = None) -> dict:
    """One Tune trial per seed (the recipe's search space, if any, multiplies); storage in artifacts/."""
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    resume = context.resume
    if resume is not None and resume.tune_experiment is None:
        raise ValueError("a Tune run resumes from a previous Tune run's id, not from a checkpoint folder")
    seeds = context.seeds.integers(_TUNE_SEED_STREAM, num_seeds)
    plan_sampling(context, config, parallel_envs)  # a bad parallel_envs fails before Ray starts
    if stopping(context, "start-up"):
        return {"trials": 0, "seeds": seeds}
    storage = os.path.join(str(context.artifacts_dir), TUNE_STORAGE)
    _ACTIVE.update(recorder=context.recorder, saved_after_stop=set(), interrupted=False)
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # SIGINT is the harness's: stop, checkpoint, record
    try:
        with ray_cluster(context) as profile:
            if stopping(context, "ray.init"):
                return {"trials": 0, "seeds": seeds}
            sampling = plan_sampling(context, config, parallel_envs, profile)
            config = _with_node_ids(_configured(context, config, tune.grid_search(seeds), sampling))
            context.recorder.update_manifest(runner={
                "kind": "tune", "algorithm": config.algo_class.__name__, "trial_seeds": seeds,
                "storage": TUNE_STORAGE, "sampling": sampling_record(sampling, config),
                "determinism": hardware.determinism(profile, sampling, "tune"),
                "stop": dataclasses.asdict(stop), "checkpoint_every": checkpoint_every})
            if resume is not None:
                # Tune resumes in place: resume a copy, so the parent's records stay as they were.
                shutil.copytree(resume.tune_experiment, storage)
                tuner = tune.Tuner.restore(storage, trainable=config.algo_class, param_space=config,
                                           resume_unfinished=True, resume_errored=True)
            else:
                tuner = tune.Tuner(
                    config.algo_class,
                    param_space=config,
                    tune_config=tune.TuneConfig(scheduler=_PauseOnStop()),
                    run_config=tune.RunConfig(
                        name=TUNE_STORAGE,
                        storage_path=str(context.artifacts_dir),
                        stop=tune.stopper.FunctionStopper(lambda trial_id, result: stop.reached(result)),
                        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=checkpoint_every,
                                                                checkpoint_at_end=True),
                        callbacks=[_StreamToRecords()],
                        verbose=0,
                    ),
                )
            result_grid = tuner.fit()
    finally:
        _ACTIVE.clear()
    trials = _trial_table(result_grid, str(context.artifacts_dir))
    context.recorder.set_summary_section("trials", trials)
    failed = [trial for trial in trials if trial["status"] == "error"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(trials)} Tune trials failed; first: {failed[0]['error']}")
    return {"trials": len(trials), "seeds": seeds}
