"""PPO vs PPG at the same env-step budget: the tasks, one training run, the summary, the plot, a recipe's run.

    from experiments.ppo_vs_ppg import comparison

    jobs = [comparison.Job("Mess3Control", algorithm, seed) for algorithm in ("PPO", "PPG") for seed in seeds]
    outcome = comparison.run_comparison(context, jobs, question="...")   # in a recipe: all of the below
    record = comparison.train_one(jobs[0], smoke=True)                   # one run, in this process (cpu profile)
    summary = comparison.summarise([record, ...])                        # per task and label
    save_figure(comparison.learning_curves_figure(records, references, title=...), path)

Two tasks. CartPole-v1 (fully observed; MLP 64x64; RLlib's tuned CartPole PPO settings) and
Mess3 occupancy control (partially observed: the agent sees the last token and its previous
action; the controlled_mess3 task's env, TransformerModel and PPO settings unchanged). PPO is
each task's usual PPO (CartPole: separate critic encoder; Mess3: the task's shared encoder);
PPG is PPGConfig with the detach design (one encoder, PPGMLPModel / PPGTransformerModel), the
same PPO settings, and value coefficients tuned to the task's return scale (docs/ppg.md).

A run is the harness's in-process runner (`rl.harness.training.in_process`: a Learner and a local
EnvRunner with 8 vectorised envs, no Ray; seed and torch threads set by the harness); both
algorithms see the same seeds. Its curve is the EnvRunner's mean return of recent training
episodes after each iteration, against env steps sampled.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import multiprocessing
import os
import resource
import signal
import statistics
import time
from typing import Any, Callable, Iterator

import numpy as np

from rl.harness.training.hardware import HardwareProfile
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, RETURN

ALGORITHMS = ("PPO", "PPG")
NUM_ENVS_PER_RUN = 8


@dataclasses.dataclass(frozen=True)
class Task:
    """One benchmark task: its budgets, its PPO and PPG configs, its env, and reference policies."""

    env_steps: dict[bool, int]  # smoke -> env-step budget
    config: Callable[[str, bool], Any]  # (algorithm, smoke) -> PPOConfig or PPGConfig (PPO's settings plus PPG's)
    make_env: Callable[[], Any]  # -> a gymnasium.Env
    reference_policies: dict[str, Callable[[Any, np.random.Generator], int]]  # name -> (env, rng) -> action
    ceiling: float | None = None  # the largest return an episode can earn, when known
    # -> an rl.analysis.scores.ScoreScale of the episode return, when exact references exist: runs
    # then also report their final return and AUC on it, and its two ends are reference lines
    score_scale: Callable[[], Any] | None = None


@dataclasses.dataclass(frozen=True)
class Job:
    """One training run; runs with the same `group` (label, or else the algorithm) are summarised together.

    `overrides`: (key, value) pairs of `AlgorithmConfig.training` applied over the task's settings,
    e.g. `Job("CartPole-v1", "PPG", seed, label="beta_clone 10", overrides=(("beta_clone", 10.0),))`.
    """

    task: str
    algorithm: str
    seed: int
    label: str = ""
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def group(self) -> str:
        return self.label or self.algorithm


# -- CartPole-v1 ------------------------------------------------------------------------------------

CARTPOLE_TRAINING = {"lr": 3e-4, "train_batch_size_per_learner": 4000, "minibatch_size": 128, "num_epochs": 6,
                     "entropy_coeff": 0.0}
CARTPOLE_SMOKE_TRAINING = {"train_batch_size_per_learner": 512, "num_epochs": 1}
# Returns of order 100-500: the aux value losses start near 1e3, so 0.001 keeps them of order 1 next
# to the cloning KL; beta_clone 10 then holds the policy through each phase (ppg_tuning: with
# beta_clone 1 returns dropped after phases, with coefficients 0.01 PPG did not learn; docs/ppg.md).
CARTPOLE_PPG = {"policy_iterations_per_aux": 4, "aux_epochs": 6, "aux_minibatch_size": 512, "aux_lr": 3e-4,
                "beta_clone": 10.0, "aux_value_loss_coeff": 0.001, "aux_true_value_loss_coeff": 0.001}
SMOKE_PPG = {"policy_iterations_per_aux": 2, "aux_epochs": 2}


def _cartpole(algorithm: str, smoke: bool):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl.learners import ActorCriticPPOTorchLearner, PPGConfig
    from rl.learners.models import MLPModel
    from rl.learners.ppg import PPGMLPModel

    training = CARTPOLE_TRAINING | (CARTPOLE_SMOKE_TRAINING if smoke else {})
    if algorithm == "PPO":
        config = PPOConfig().learners(learner_class=ActorCriticPPOTorchLearner).training(**training)
        module_class, model_config = MLPModel, {"hidden_sizes": [64, 64], "vf_share_layers": False}
    else:
        config = PPGConfig().training(**training, **(CARTPOLE_PPG | (SMOKE_PPG if smoke else {})))
        module_class, model_config = PPGMLPModel, {"hidden_sizes": [64, 64], "vf_share_layers": True}
    return config.environment("CartPole-v1").rl_module(
        rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config))


# -- Mess3 occupancy control ------------------------------------------------------------------------

# Returns are sums of per-step rewards in [-KL, 1] with gamma 0.9, so value targets are of order
# 1-10: the paper's coefficient 1 keeps the value terms of order 1 next to the cloning KL.
MESS3_PPG = {"policy_iterations_per_aux": 4, "aux_epochs": 6, "aux_minibatch_size": 1024, "aux_lr": 1e-3,
             "beta_clone": 1.0, "aux_value_loss_coeff": 1.0, "aux_true_value_loss_coeff": 1.0}


def _mess3(algorithm: str, smoke: bool):
    from experiments.mess3.task import controlled_mess3
    from rl.learners import PPGConfig
    from rl.learners.ppg import PPGTransformerModel

    if algorithm == "PPO":
        return controlled_mess3.ppo_config(smoke=smoke)
    return controlled_mess3.ppo_config(smoke=smoke, algorithm=PPGConfig, module_class=PPGTransformerModel,
                                       learner_class=None).training(**(MESS3_PPG | (SMOKE_PPG if smoke else {})))


def _cartpole_env():
    import gymnasium

    return gymnasium.make("CartPole-v1")


def _mess3_env():
    from experiments.mess3.task import controlled_mess3

    return controlled_mess3.make_env()


def _mess3_scale():
    from experiments.mess3.task import control_scores

    return control_scores.scales()["episode_return"]  # 0: best memoryless policy, 1: belief-optimal


TASKS = {
    "CartPole-v1": Task(
        env_steps={False: 100_000, True: 1_024},
        config=_cartpole,
        make_env=_cartpole_env,
        reference_policies={"uniform random": lambda env, rng: int(rng.integers(2))},
        ceiling=500.0,
    ),
    "Mess3Control": Task(
        # 64 updates of 2048; PPO passes the best memoryless return by about 100k steps (README.md)
        env_steps={False: 131_072, True: 2_048},
        config=_mess3,
        make_env=_mess3_env,
        # Action 0 lets the process run; action 1 + j tilts toward state j (the target is state 0).
        reference_policies={
            "passive": lambda env, rng: 0,
            "always tilt to state 0": lambda env, rng: 1,
            "uniform random": lambda env, rng: int(rng.integers(4)),
        },
        score_scale=_mess3_scale,
    ),
}


def config_for(task: str, algorithm: str, *, smoke: bool, overrides: dict | None = None):
    """The AlgorithmConfig of one run: the task's settings, then `overrides` (training keys).

    Sampling (NUM_ENVS_PER_RUN envs in one local EnvRunner) and the seed are the in-process runner's.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(TASKS)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    config = TASKS[task].config(algorithm, smoke)
    if overrides:
        config = config.training(**overrides)
    return config


SETTING_KEYS = ("lr", "gamma", "lambda_", "train_batch_size_per_learner", "minibatch_size", "num_epochs",
                "entropy_coeff", "vf_loss_coeff", "clip_param", "policy_iterations_per_aux", "aux_epochs",
                "aux_minibatch_size", "aux_lr", "beta_clone", "aux_value_loss_coeff", "aux_true_value_loss_coeff")


def settings_of(task: str, algorithm: str, *, smoke: bool, overrides: dict | None = None) -> dict[str, Any]:
    """What a run of (task, algorithm) trains with: budget, module, learner and the settings that differ by task."""
    config = config_for(task, algorithm, smoke=smoke, overrides=overrides)
    spec = config.rl_module_spec
    settings = {"env_steps": TASKS[task].env_steps[smoke], "num_envs": NUM_ENVS_PER_RUN,
                "module": _qualified_name(spec.module_class), "model_config": dict(spec.model_config or {}),
                "learner": _qualified_name(config.learner_class)}
    settings.update({key: getattr(config, key) for key in SETTING_KEYS if hasattr(config, key)})
    return settings


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def train_one(job: Job, *, smoke: bool, profile: HardwareProfile | None = None) -> dict[str, Any]:
    """Trains `job` to its task's budget in this process (rl.harness.training.in_process); returns its record.

    `profile`: the hardware profile of this process (None: this machine's cpu profile).
    The record: the job's fields (`label` = its group), `curve` [[env steps, mean return], ...], `final_return` (the curve's last point),
    `area_under_curve` (AUC), `wall_seconds`, `peak_rss_mib` (this process's peak resident set:
    run it in a fresh process for a per-run figure) and `built_rss_mib` (resident set once the
    Learner and EnvRunner are built: imports and modules, before training) and
    `policy_update_peak_rise_mib` (the largest rise of the peak resident set above the RSS before
    a `Learner.update`, over the updates without an auxiliary phase). PPG adds `aux_phases`,
    `aux_update_peak_rise_mib` (the same over the updates that ran one: the learner's memory in an
    aux phase vs a policy phase), `aux_buffer_bytes_per_env_step` and `aux_kl_max` (largest
    minibatch KL to the frozen policy over all phases). Peak figures reset VmHWM before each update;
    the rollouts in between are outside them.
    """
    from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID

    from rl.harness.training import in_process, runners

    task, algorithm, seed = job.task, job.algorithm, job.seed
    config = config_for(task, algorithm, smoke=smoke, overrides=dict(job.overrides))
    budget = TASKS[task].env_steps[smoke]
    with in_process.Trainer(config, env=TASKS[task].make_env(), seed=seed, parallel_envs=NUM_ENVS_PER_RUN,
                            profile=profile) as trainer:
        built_rss_mib = _memory_mib("VmRSS")
        start = time.monotonic()
        curve, buffer_bytes_per_step, aux_kl_max, rises = [], [], [], []
        update_peak_rise = {"policy": [], "aux": []}  # MiB above the RSS before each Learner.update
        for update in trainer.train(runners.StopRule(env_steps=budget), around_update=lambda: _peak_rise(rises)):
            result, row = update.result, update.row
            aux_phase = algorithm == "PPG" and in_process.scalar(result[ALL_MODULES]["ppg/aux_phase_triggered"]) == 1.0
            update_peak_rise["aux" if aux_phase else "policy"].append(rises[-1])
            if aux_phase:
                cycle = result[ALL_MODULES]
                buffer_bytes_per_step.append(in_process.scalar(cycle["ppg/buffer_bytes"])
                                             / in_process.scalar(cycle["ppg/buffered_env_steps"]))
                aux_kl_max.append(in_process.scalar(result[DEFAULT_MODULE_ID]["ppg/aux_kl_max"]))
            if row[RETURN] is not None:
                curve.append([row[ENV_STEPS], round(row[RETURN], 4)])
        env_steps = trainer.row[ENV_STEPS]
        wall_seconds = round(time.monotonic() - start, 1)
    if not curve:
        raise RuntimeError(f"{task} {job.group} seed {seed}: no episode finished within {budget} env steps")
    record = {
        "task": task,
        "algorithm": algorithm,
        "label": job.group,
        "overrides": dict(job.overrides),
        "seed": seed,
        "env_steps": env_steps,
        "curve": curve,
        "final_return": curve[-1][1],
        "area_under_curve": round(area_under_curve(curve), 4),
        "wall_seconds": wall_seconds,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "built_rss_mib": built_rss_mib,
        "policy_update_peak_rise_mib": max(update_peak_rise["policy"]),
    }
    if TASKS[task].score_scale is not None:
        scale = TASKS[task].score_scale()
        record["normalised_final_return"] = round(scale.normalise(record["final_return"]), 4)
        record["normalised_area_under_curve"] = round(scale.normalise(record["area_under_curve"]), 4)
    if algorithm == "PPG":
        record["aux_phases"] = len(aux_kl_max)
        if aux_kl_max:
            record["aux_buffer_bytes_per_env_step"] = round(statistics.fmean(buffer_bytes_per_step), 1)
            record["aux_kl_max"] = float(f"{max(aux_kl_max):.3g}")
            record["aux_update_peak_rise_mib"] = max(update_peak_rise["aux"])
    return record


@contextlib.contextmanager
def _peak_rise(rises: list[float]) -> Iterator[None]:
    """Appends to `rises` how far the peak resident set rose (MiB) above the RSS on entry, over the block."""
    before = _reset_peak_rss()
    yield
    rises.append(round(_memory_mib("VmHWM") - before, 1))


def _memory_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (peak resident since start or the last reset) of this process."""
    with open("/proc/self/status") as status:
        kilobytes = next(int(line.split()[1]) for line in status if line.startswith(field + ":"))
    return round(kilobytes / 1024, 1)


def _reset_peak_rss() -> float:
    """Resets VmHWM to the current RSS (Linux: "5" to /proc/self/clear_refs) and returns that RSS."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _memory_mib("VmRSS")


def area_under_curve(curve: list[list[float]]) -> float:
    """The curve's mean over env steps (trapezoids from its first to its last point), in return units.

    A single point is its own mean. Normalised by the span so that runs with slightly different
    step counts compare: a curve that is 0 for the first half and 100 for the second scores ~50.
    """
    steps, returns = (np.asarray(column, dtype=float) for column in zip(*curve))
    if len(steps) == 1 or steps[-1] == steps[0]:
        return float(returns.mean())
    return float(np.trapezoid(returns, steps) / (steps[-1] - steps[0]))


SUMMARY_KEYS = ("final_return", "area_under_curve", "normalised_final_return", "normalised_area_under_curve",
                "wall_seconds", "peak_rss_mib", "built_rss_mib",
                "policy_update_peak_rise_mib", "aux_update_peak_rise_mib", "aux_buffer_bytes_per_env_step", "aux_kl_max")


def _by_task_and_label(records: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{task: {label: [records]}}, each level in order of first appearance."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for record in records:
        grouped.setdefault(record["task"], {}).setdefault(record["label"], []).append(record)
    return grouped


def _figures(group: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    figures = {}
    for key in SUMMARY_KEYS:
        values = [record[key] for record in group if record.get(key) is not None]
        if values:
            figures[key] = {"mean": float(f"{statistics.fmean(values):.5g}"), "min": min(values), "max": max(values),
                            "seeds": len(values)}
    return figures


def summarise(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{task: {label: {figure: {"mean", "min", "max", "seeds"}}}} over the records' seeds."""
    return {task: {label: _figures(group) for label, group in labels.items()}
            for task, labels in _by_task_and_label(records).items()}


def reference_returns(task: str, *, episodes: int, seed: int) -> dict[str, dict[str, float]]:
    """Mean episode return (and its standard error) of each of the task's fixed reference policies."""
    env = TASKS[task].make_env()
    rng = np.random.default_rng(seed)
    references = {}
    for name, policy in TASKS[task].reference_policies.items():
        returns = []
        for episode in range(episodes):
            env.reset(seed=int(rng.integers(2**31)))
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(policy(env, rng))
                total += reward
                done = terminated or truncated
            returns.append(total)
        references[name] = {"mean": round(float(np.mean(returns)), 3),
                            "standard_error": round(float(np.std(returns, ddof=1) / np.sqrt(episodes)), 3)}
    if TASKS[task].ceiling is not None:
        references["ceiling"] = {"mean": TASKS[task].ceiling, "standard_error": 0.0}
    if TASKS[task].score_scale is not None:
        scale = TASKS[task].score_scale()
        for name, value in ((scale.zero_name, scale.zero), (scale.one_name, scale.one)):
            references[f"{name} (exact)"] = {"mean": round(float(value), 3), "standard_error": 0.0}
    return references


COLOURS = {"PPO": "tab:blue", "PPG": "tab:orange"}
OTHER_COLOURS = ("tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")  # variants
LINE_STYLES = ("--", ":", "-.", (0, (1, 3)))  # one per reference line


def learning_curves_figure(records: list[dict[str, Any]], references: dict[str, dict], *, title: str):
    """One panel per task: per label, each seed's curve (thin) and their mean (thick); references (grey).

    Save it with `rl.analysis.plots.save_figure(figure, path)` (Agg, atomic).
    """
    from matplotlib.figure import Figure

    grouped = _by_task_and_label(records)
    variants = iter(OTHER_COLOURS * len(records))
    colours = {label: COLOURS.get(label) or next(variants) for label in dict.fromkeys(r["label"] for r in records)}
    figure = Figure(figsize=(max(8.0, 6.0 * len(grouped)), 4.6), dpi=120)
    for index, (task, labels) in enumerate(grouped.items()):
        axes = figure.add_subplot(1, len(grouped), index + 1)
        for label, group in labels.items():
            colour = colours[label]
            for record in group:
                axes.plot(*zip(*record["curve"]), color=colour, alpha=0.3, linewidth=0.8)
            grid = np.linspace(max(record["curve"][0][0] for record in group),
                               min(record["curve"][-1][0] for record in group), 100)
            mean = np.mean([np.interp(grid, *zip(*record["curve"])) for record in group], axis=0)
            axes.plot(grid, mean, color=colour, linewidth=2.2,
                      label=f"{label}: mean of {len(group)} seeds (thin: each seed)")
        for number, (name, value) in enumerate(references.get(task, {}).items()):
            axes.axhline(value["mean"], color="grey", linestyle=LINE_STYLES[number % len(LINE_STYLES)],
                         linewidth=1.0, label=f"{name}: {value['mean']:g}")
        axes.set_title(task)
        axes.set_xlabel("env steps sampled")
        axes.set_ylabel("mean episode return (recent training episodes)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, loc="best")
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure


# -- a recipe's run ---------------------------------------------------------------------------------

RESULTS_FILE = "comparison.json"
PLOT_FILE = "learning_curves.png"
REFERENCE_EPISODES = {False: 1000, True: 20}


def run_comparison(context, jobs: list[Job], *, question: str) -> dict[str, Any]:
    """Trains `jobs` (each in a fresh process), then records and prints the comparison.

    As many runs at a time as the hardware profile has CPUs. A SIGINT or SIGTERM cancels the runs
    the pool has not taken yet (workers ignore SIGINT), lets the others finish and records them; a failed run is
    recorded with its error, the others are kept, and the recipe then fails naming it. Writes
    RESULTS_FILE (question, settings per group, seeds, reference returns, summary, every run) and
    PLOT_FILE to results/<run-id>/, one metrics.jsonl trial per run; prints the summary as JSON.
    """
    from rl.analysis.plots import save_figure
    from rl.harness.run import records
    from rl.harness.run.manifest import OwnLoopRunner
    from rl.harness.training import in_process

    # Learners stay on the CPU, as the memory figures (resident sets) and the README's timings assume;
    # several worker processes would otherwise share one GPU.
    profile = in_process.default_profile()
    workers = max(1, min(context.hardware.num_cpus, len(jobs)))
    context.recorder.record_runner(OwnLoopRunner(kind=in_process.RUNNER_KIND, details={
        "processes": workers, "learner_device": profile.learner_device,
        "sampling": in_process.local_plan(NUM_ENVS_PER_RUN).as_dict()}))
    print(f"{len(jobs)} runs, {workers} at a time", flush=True)
    finished, failures = _train_all(context, jobs, workers, profile)
    settings: dict[str, dict[str, Any]] = {}  # task -> group -> what its runs trained with
    for job in jobs:
        if job.group not in settings.setdefault(job.task, {}):
            settings[job.task][job.group] = settings_of(job.task, job.algorithm, smoke=context.smoke,
                                                        overrides=dict(job.overrides))
    reference_seed = context.seeds.integer("reference_policies")
    references = {task: reference_returns(task, episodes=REFERENCE_EPISODES[context.smoke], seed=reference_seed)
                  for task in settings}
    report = {
        "question": question,
        "settings": settings,
        "seeds": sorted({job.seed for job in jobs}),
        "complete": len(finished) == len(jobs),
        "failed": [{**dataclasses.asdict(job), "error": error} for job, error in failures.items()],
        "references": references,
        "summary": summarise(finished),
        "runs": finished,
    }
    records.write_json_atomically(os.path.join(context.results_dir, RESULTS_FILE), report)
    if finished:
        title = f"{question} ({context.run_id})"
        save_figure(learning_curves_figure(finished, references, title=title),
                    os.path.join(context.results_dir, PLOT_FILE))
    print(json.dumps({"summary": report["summary"], "references": references}, indent=1))
    print(f"results: {context.results_dir}")
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(jobs)} runs failed (errors in {RESULTS_FILE}): "
                           + "; ".join(f"{job.task} {job.group} seed {job.seed}: {error}" for job, error in failures.items()))
    return {"summary": report["summary"], "complete": report["complete"]}


def _train_all(context, jobs: list[Job], workers: int, profile: HardwareProfile) -> tuple[list[dict], dict[Job, str]]:
    """Runs `jobs` in fresh processes; returns (records of those that finished, in job order; {job: error})."""
    started = time.monotonic()
    finished, failed = {}, {}
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=spawn, max_tasks_per_child=1,
                                                initializer=_leave_interrupts_to_the_parent) as pool:
        futures = {pool.submit(train_one, job, smoke=context.smoke, profile=profile): job for job in jobs}
        stopping = False
        for future in concurrent.futures.as_completed(futures):
            if future.cancelled():
                continue
            job = futures[future]
            done = f"[{len(finished) + len(failed) + 1}/{len(jobs)}] {job.task} {job.group} seed {job.seed}"
            try:
                record = future.result()
            except Exception as error:  # one broken run must not lose the others' records
                failed[job] = f"{type(error).__name__}: {error}"
                print(f"{done}: FAILED: {failed[job]}", flush=True)
            else:
                finished[job] = record
                _log_curve(context, record)
                print(f"{done}: final return {record['final_return']:g}, AUC {record['area_under_curve']:g}, "
                      f"{record['wall_seconds']:g} s ({time.monotonic() - started:.0f} s elapsed)", flush=True)
            if context.recorder.stop_requested and not stopping:
                stopping = True
                print("stop requested; cancelling the runs not started", flush=True)
                for pending in futures:
                    pending.cancel()
    return [finished[job] for job in jobs if job in finished], failed


def _leave_interrupts_to_the_parent() -> None:
    # Ctrl-C reaches the whole process group; the parent's handler decides (finish the running runs).
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _log_curve(context, record: dict) -> None:
    trial = f"{record['task']}/{record['label']}/seed{record['seed']}"
    for iteration, (env_steps, episode_return) in enumerate(record["curve"], start=1):
        context.recorder.log_metrics({"trial_id": trial, ITERATION: iteration, ENV_STEPS: env_steps,
                                      RETURN: episode_return}, trial=trial)
