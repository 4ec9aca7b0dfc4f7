"""A study's members as parallel Ray Tune trials: each trial runs one member's ordinary run in a child process.

    trials = [MemberTrial(run_id="s1-reward_only-s0", argv=(sys.executable, "-m", "rl.harness.commands.cli", ...),
                          roots=("results", "artifacts"), log="studies/s1/logs/s1-reward_only-s0.log",
                          node_folders=True)]
    errors = member_trials.run_trials(trials, ray_address=None, num_cpus=2, cpus_per_trial=1, max_concurrent=None,
                                      storage=artifacts / "tune", env={...}, stop_signal=lambda: stop,
                                      on_tick=refresh_record)   # on_tick({"s1-reward_only-s0": 2}): attempts so far

Tune places the trials (all cores here, a cluster's nodes with `ray_address`) and runs as many at
once as the CPUs allow. The run itself is the harness's own command line in a child process, so
it records itself exactly as a run typed by hand (its manifest, its signals, its exit status);
the trial only waits for it. Its output (stdout and stderr) goes to the trial's `log` file, not
to the study's terminal, which shows only the members' events. A stop (`stop_signal()` returns a
signal name) reaches every child as SIGTERM through a Ray actor that each trial polls, so trials
on other nodes stop too; a trial that starts after the stop runs nothing, and once no trial runs,
the trials still waiting for resources (a busy cluster) are dropped, so a stop ends the study
within seconds. If a trial's worker dies, Linux sends its child SIGTERM (PR_SET_PDEATHSIG), and
the run still records itself `interrupted`.

A trial lost with its node (the machine gone, its run killed with it), or whose run was killed by
a signal the study did not send, is tried again by Tune on a node that is left, up to `retries`
times (a study with a store). A run id is never used twice (the
store keeps each run's records), so the next attempt is a run of its own, `<run-id>-a<N>`
(`MemberTrial.attempt_id`), resumed (`--resume-from`) from the previous attempt's run: its newest
checkpoint in the store. The attempts are counted where the stop flag is, on the cluster's head, and
`on_tick` receives them, so the study names each attempt's run as its member's.

Where a member writes: the study's roots, passed as `--results-dir`/`--artifacts-dir`; with
`node_folders` (a study with a store, which reads its members from the store), a node started with
$RL_HARNESS_NODE_FOLDER gives its own `results/` and `artifacts/` below that folder instead, so a
cluster's nodes share no disk with the driver or each other.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping

import ray
from ray import tune

from rl.harness import env_vars
from rl.harness.training import lifecycle, member_devices

POLL_S = 0.5  # how often a trial looks at its child and at the stop flag
WORKER_NICENESS_ENV = "RAY_worker_niceness"  # Ray's override of its RayConfig value
_STOP_FLAG_NAMESPACE = "rl_harness_study"
_RUN_ID_FLAG, _RESUME_FLAG = "--run-id", "--resume-from"
_HEAD_RESOURCE = "node:__internal_head__"  # Ray's resource of the head node alone


@dataclasses.dataclass(frozen=True)
class MemberTrial:
    """One member's run: its id (the trial's name), the command line that runs it less its folders, the study's
    (results, artifacts) roots, the file its output goes to (below the artifacts root), and whether a node's own
    folder replaces the roots."""

    run_id: str
    argv: tuple[str, ...]
    roots: tuple[str, str]
    log: str
    node_folders: bool

    def on_node(self, environ: Mapping[str, str], attempt: int = 1) -> tuple[list[str], pathlib.Path]:
        """The full command line and the log file of `attempt` on the node whose environment is `environ`."""
        node = environ.get(env_vars.NODE_FOLDER_ENV) if self.node_folders else None
        results, artifacts = (os.path.join(node, "results"), os.path.join(node, "artifacts")) if node else self.roots
        argv = list(self.argv)
        log = self.log
        if attempt > 1:  # the previous attempt's run, lost with its node, continued under an id of its own
            if _RESUME_FLAG in argv:
                del argv[argv.index(_RESUME_FLAG) : argv.index(_RESUME_FLAG) + 2]
            argv[argv.index(_RUN_ID_FLAG) + 1] = self.attempt_id(attempt)
            argv += [_RESUME_FLAG, self.attempt_id(attempt - 1)]
            log = str(pathlib.PurePath(self.log).with_name(f"{self.attempt_id(attempt)}.log"))
        return [*argv, "--results-dir", results, "--artifacts-dir", artifacts], pathlib.Path(artifacts, log)

    def attempt_id(self, attempt: int) -> str:
        """The run id of the trial's `attempt` (1: `run_id`): the study's attempt numbering (`<first>-a<N>`) goes on."""
        if attempt == 1:
            return self.run_id
        first, _, number = self.run_id.rpartition("-a")
        if first and number.isdigit():
            return f"{first}-a{int(number) + attempt - 1}"
        return f"{self.run_id}-a{attempt}"


class MemberKilled(RuntimeError):
    """A member's run ended by a signal the study did not send: its trial failed, and is tried again (`retries`)."""


@ray.remote(num_cpus=0)
class _StopFlag:
    """The signal name once the study was asked to stop (None before), and how many times each trial began; zero
    CPUs: it never waits for a slot."""

    def __init__(self):
        self._signal = None
        self._attempts: dict[str, int] = {}

    def set(self, name: str) -> None:
        self._signal = self._signal or name

    def get(self) -> str | None:
        return self._signal

    def begin(self, run_id: str) -> int:
        """Counts an attempt of trial `run_id`; returns its number (1 for the first)."""
        self._attempts[run_id] = self._attempts.get(run_id, 0) + 1
        return self._attempts[run_id]

    def attempts(self) -> dict[str, int]:
        return dict(self._attempts)


def _terminate_with_parent() -> None:
    """In the child before exec: SIGTERM when the trial's worker thread ends (Linux prctl PR_SET_PDEATHSIG = 1)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def _start_member(trial: MemberTrial, attempt: int, env: Mapping[str, str]) -> subprocess.Popen:
    """The member's run (of `attempt`) as a child process on this node, whose stdout and stderr go to its log."""
    argv, log = trial.on_node(os.environ, attempt)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:  # the child keeps its own descriptor
        return subprocess.Popen(
            argv,
            env={**os.environ, **env, env_vars.MEMBER_LOG_ENV: str(log)},
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=_terminate_with_parent,  # noqa: PLW1509 - one prctl call, safe after fork
        )


def _run_member(config: dict, *, trials: Mapping[str, MemberTrial], env: Mapping[str, str], stop_flag: str) -> None:
    """Tune's function trainable: start the member's run, stop it on request, report its exit status."""
    flag = ray.get_actor(stop_flag, namespace=_STOP_FLAG_NAMESPACE)
    if ray.get(flag.get.remote()) is not None:
        tune.report({"exit_code": None, "skipped": True})
        return
    attempt = ray.get(flag.begin.remote(config["run_id"]))
    devices = member_devices.visible_devices(ray.get_gpu_ids())
    child = _start_member(trials[config["run_id"]], attempt, {**env, **devices})
    asked = False
    while child.poll() is None:
        if not asked and ray.get(flag.get.remote()) is not None:
            child.send_signal(signal.SIGTERM)  # the run finishes its iteration, checkpoints, records `interrupted`
            asked = True
        time.sleep(POLL_S)
    if child.returncode < 0 and not asked:  # killed by a signal the study did not send (its machine going down)
        raise MemberKilled(
            f"run {child.args[child.args.index(_RUN_ID_FLAG) + 1]} was killed by signal {-child.returncode}"
        )
    tune.report({"exit_code": child.returncode, "skipped": False})


class _TrialStates(tune.Callback):
    """Whether any trial runs, as of Tune's latest step."""

    def __init__(self):
        self.any_running = False

    def on_step_begin(self, iteration: int, trials: list, **info) -> None:
        self.any_running = any(trial.status == "RUNNING" for trial in trials)


class _EndWaitingTrials(tune.Stopper):
    """After a stop request, ends the experiment once no trial runs: the running ones stop themselves
    (their runs checkpoint), and those still waiting for resources would otherwise keep Tune waiting."""

    def __init__(self, stop_signal: Callable[[], str | None], states: _TrialStates):
        self._stop_signal = stop_signal
        self._states = states

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self._stop_signal() is not None and not self._states.any_running


def _watch(
    stop_signal: Callable[[], str | None], flag, on_tick: Callable[[dict[str, int]], None], done: threading.Event
) -> None:
    raised = False
    while not done.wait(POLL_S):
        name = stop_signal()
        if name is not None and not raised:
            flag.set.remote(name)
            raised = True
        try:
            attempts = ray.get(flag.attempts.remote(), timeout=POLL_S * 10)
        except ray.exceptions.RayError:  # unanswered (or timed out) while the cluster loses a node: the next tick
            continue
        on_tick(attempts)


def run_trials(
    trials: list[MemberTrial],
    *,
    ray_address: str | None,
    num_cpus: int,
    cpus_per_trial: int,
    max_concurrent: int | None,
    storage: pathlib.Path,
    env: Mapping[str, str],
    stop_signal: Callable[[], str | None],
    on_tick: Callable[[dict[str, int]], None],
    on_ray_started: Callable[[], None],
    retries: int = 0,
) -> dict[str, str]:
    """Runs `trials` on Tune until all ended, each tried again up to `retries` times when its worker is lost; returns
    {run id of its last attempt: error} for trials whose worker failed.

    `on_ray_started` runs once Ray is up: the place to install the caller's signal handlers, since
    ray.init installs Ray's own (its C++ failure handler would abort the process on SIGTERM).
    """
    started = not ray.is_initialized()
    if started:
        # Ray starts its workers at niceness 15 (RayConfig worker_niceness), and each member's run is a
        # child of one: the runs are the study's work, so they keep the user's priority.
        os.environ.setdefault(WORKER_NICENESS_ENV, "0")
        lifecycle.init_ray(ray_address, num_cpus)
    on_ray_started()
    flag_name = f"stop-{storage.name}-{os.getpid()}"
    # On the head (as Ray Train places its state actor): the flag outlives any other node the cluster loses
    # (every trial asks it). The driver's own node is not it: a driver on a worker's machine may attach to its raylet.
    flag = _StopFlag.options(name=flag_name, namespace=_STOP_FLAG_NAMESPACE, resources={_HEAD_RESOURCE: 0.001}).remote()
    done = threading.Event()
    states = _TrialStates()
    watcher = threading.Thread(target=_watch, args=(stop_signal, flag, on_tick, done), daemon=True)
    # The study owns SIGINT (Tune's handler would end trials without letting the runs checkpoint).
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    # ... and its terminal, which shows the members' events: Tune's console output (its configuration box,
    # where its results are) stays off at verbose 0 only with its legacy reporter.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    try:
        watcher.start()
        # The grid is the run ids alone (what Tune shows and logs); the command lines travel as parameters.
        trainable = tune.with_parameters(
            _run_member, trials={trial.run_id: trial for trial in trials}, env=dict(env), stop_flag=flag_name
        )
        # On GPUs, each member gets a share of one, and its run sees that device only (member_devices.py).
        gpus_per_trial = member_devices.cluster_gpu_share(
            ray.cluster_resources(), members=len(trials), cpus_per_member=cpus_per_trial, max_concurrent=max_concurrent
        )
        tuner = tune.Tuner(
            tune.with_resources(trainable, member_devices.trial_resources(cpus=cpus_per_trial, gpus=gpus_per_trial)),
            param_space={"run_id": tune.grid_search([trial.run_id for trial in trials])},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=max_concurrent,
                reuse_actors=True,
                trial_name_creator=lambda trial: trial.config["run_id"],
                trial_dirname_creator=lambda trial: trial.config["run_id"],
            ),
            run_config=tune.RunConfig(
                name=storage.name,
                storage_path=str(storage.parent),
                verbose=0,
                failure_config=tune.FailureConfig(max_failures=retries),
                stop=_EndWaitingTrials(stop_signal, states),
                callbacks=[states],
            ),
        )
        # Trials a stop dropped while they waited for resources left no results; Tune warns for each of them.
        logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
        grid = tuner.fit()
        attempts = ray.get(flag.attempts.remote())
        by_id = {trial.run_id: trial for trial in trials}
        return {
            by_id[result.config["run_id"]].attempt_id(attempts.get(result.config["run_id"], 1)): (
                f"{type(result.error).__name__}: {result.error}"
            )
            for result in grid
            if result.error is not None
        }
    finally:
        done.set()
        watcher.join()
        ray.kill(flag)
        if started:
            lifecycle.shutdown_ray()
