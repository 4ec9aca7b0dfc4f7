"""One PPO or PPG run of the comparison: train in this process, measure, score against the task's references.

    from experiments.ppo_vs_ppg.task import stages

    def run(context):                                     # an agent recipe (cartpole_ppg.py)
        return stages.run(context, "CartPole-v1", "PPG", overrides=tasks.ppg_overrides(context.hyperparameters))

    STUDY = Study(agents={...}, seeds=(0, 1, 2, 3, 4), scores=stages.SCORES, pairs=...)   # a study of them

A run is the harness's in-process runner (`rl.harness.training.in_process`: a Learner and a local
EnvRunner with 8 vectorised envs, no Ray; seed and torch threads set by the harness) in the run's
own process, so its memory figures are its own. Its rows (metrics.jsonl) are the learning curve:
the EnvRunner's mean return of recent training episodes after each iteration, against env steps
sampled; the study draws them. The outcome (summary.json) holds the figures the study's SCORES
read, the settings the run trained with and the returns of the task's reference policies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import resource
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from experiments.ppo_vs_ppg.task import tasks
from rl.harness import Score, StopRule
from rl.harness.run import metric_keys
from rl.harness.training import in_process, lifecycle

# Episodes per reference policy in each run (a study's mean over its seeds pools them).
REFERENCE_EPISODES = {False: 200, True: 20}

# What a study of these runs reports per agent (mean and 95 % interval over seeds) and per pair.
SCORES = (
    Score("final return", "final_return"),
    Score("AUC", "area_under_curve"),
    Score("normalised final return", "normalised_final_return"),
    Score("normalised AUC", "normalised_area_under_curve"),
    Score("wall s", "wall_seconds"),
    Score("peak RSS MiB", "peak_rss_mib"),
    Score("policy update peak rise MiB", "policy_update_peak_rise_mib"),
    Score("aux phase peak rise MiB", "aux_update_peak_rise_mib"),
    Score("aux buffer B / env step", "aux_buffer_bytes_per_env_step"),
    Score("largest aux KL", "aux_kl_max"),
)


def run(context, task: str, algorithm: str, *, overrides: dict | None = None) -> dict[str, Any]:
    """Trains (task, algorithm) to the task's budget in this process; returns the outcome.

    The outcome: `task`, `algorithm`, `settings` (tasks.settings_of), `env_steps`, `final_return`
    (the curve's last point), `area_under_curve` (AUC), `wall_seconds`, `peak_rss_mib` (this
    process's peak resident set), `built_rss_mib` (resident once the Learner and EnvRunner are
    built, before training), `policy_update_peak_rise_mib` (the largest rise of the peak resident
    set above the RSS before a `Learner.update`, over the updates without an auxiliary phase) and
    `references` (reference_returns). PPG adds `aux_phases`, `aux_update_peak_rise_mib` (the same
    over the updates that ran one), `aux_buffer_bytes_per_env_step` and `aux_kl_max` (largest
    minibatch KL to the frozen policy over all phases). Peak figures reset VmHWM before each update;
    the rollouts in between are outside them. A task with exact references adds
    `normalised_final_return` and `normalised_area_under_curve` on its score scale.
    """
    from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID

    overrides = dict(overrides or {})
    config = tasks.config_for(task, algorithm, smoke=context.smoke, overrides=overrides)
    budget = tasks.TASKS[task].env_steps[context.smoke]
    training = MeasuredRunner(config, tasks.TASKS[task].make_env(), StopRule(env_steps=budget), tasks.NUM_ENVS_PER_RUN)
    curve, buffer_bytes_per_step, aux_kl_max = [], [], []
    update_peak_rise = {"policy": [], "aux": []}  # MiB above the RSS before each Learner.update
    row = {metric_keys.ENV_STEPS: 0}
    for update in lifecycle.run(context, training):
        result, row = update.result, update.row
        aux_phase = algorithm == "PPG" and in_process.scalar(result[ALL_MODULES]["ppg/aux_phase_triggered"]) == 1.0
        update_peak_rise["aux" if aux_phase else "policy"].append(training.update_peak_rises[-1])
        if aux_phase:
            cycle = result[ALL_MODULES]
            buffer_bytes_per_step.append(
                in_process.scalar(cycle["ppg/buffer_bytes"]) / in_process.scalar(cycle["ppg/buffered_env_steps"])
            )
            aux_kl_max.append(in_process.scalar(result[DEFAULT_MODULE_ID]["ppg/aux_kl_max"]))
        if row[metric_keys.RETURN] is not None:
            curve.append([row[metric_keys.ENV_STEPS], row[metric_keys.RETURN]])
    if not curve:
        raise RuntimeError(f"{task} {algorithm}: no episode finished within {row[metric_keys.ENV_STEPS]} env steps")
    outcome = {
        "task": task,
        "algorithm": algorithm,
        "settings": tasks.settings_of(task, algorithm, smoke=context.smoke, overrides=overrides),
        "env_steps": row[metric_keys.ENV_STEPS],
        "final_return": round(curve[-1][1], 4),
        "area_under_curve": round(area_under_curve(curve), 4),
        "wall_seconds": round(time.monotonic() - training.built_at, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "built_rss_mib": training.built_rss_mib,
        "policy_update_peak_rise_mib": max(update_peak_rise["policy"]),
    }
    if tasks.TASKS[task].score_scale is not None:
        scale = tasks.TASKS[task].score_scale()
        outcome["normalised_final_return"] = round(scale.normalise(outcome["final_return"]), 4)
        outcome["normalised_area_under_curve"] = round(scale.normalise(outcome["area_under_curve"]), 4)
    if algorithm == "PPG":
        outcome["aux_phases"] = len(aux_kl_max)
        if aux_kl_max:
            outcome["aux_buffer_bytes_per_env_step"] = round(statistics.fmean(buffer_bytes_per_step), 1)
            outcome["aux_kl_max"] = float(f"{max(aux_kl_max):.3g}")
            outcome["aux_update_peak_rise_mib"] = max(update_peak_rise["aux"])
    if context.recorder.stop_signal is None:  # Ctrl-C or SIGTERM: end now (a --stop-at-* cap is no signal)
        outcome["references"] = reference_returns(
            task, episodes=REFERENCE_EPISODES[context.smoke], seed=context.seeds.integer("reference_policies")
        )
    print(
        f"{task} {algorithm}: final return {outcome['final_return']:g}, AUC {outcome['area_under_curve']:g},"
        f" {outcome['wall_seconds']:g} s; results: {context.results_dir}"
    )
    return outcome


@dataclasses.dataclass
class MeasuredRunner(in_process.InProcessRunner):
    """The in-process runner, measuring: when it was built (`built_at`, monotonic seconds) and its resident set
    then (`built_rss_mib`), and each update's peak rise (`update_peak_rises`, MiB)."""

    built_at: float | None = None
    built_rss_mib: float | None = None
    update_peak_rises: list = dataclasses.field(default_factory=list)

    def build(self, context, prepared):
        record = super().build(context, prepared)
        self.built_at, self.built_rss_mib = time.monotonic(), _memory_mib("VmRSS")
        return record

    def train(self, context) -> Iterator[in_process.Update]:
        for update in self.trainer.train(self.stop, around_update=lambda: _peak_rise(self.update_peak_rises)):
            context.recorder.log_metrics(update.row)
            yield update
            if context.recorder.stop_requested:  # SIGINT / SIGTERM: end after this iteration's row
                return


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


def reference_returns(task: str, *, episodes: int, seed: int) -> dict[str, dict[str, float]]:
    """Mean episode return (and its standard error) of each of the task's fixed reference policies."""
    env = tasks.TASKS[task].make_env()
    rng = np.random.default_rng(seed)
    references = {}
    for name, policy in tasks.TASKS[task].reference_policies.items():
        returns = []
        for episode in range(episodes):
            env.reset(seed=int(rng.integers(2**31)))
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(policy(env, rng))
                total += reward
                done = terminated or truncated
            returns.append(total)
        references[name] = {
            "mean": round(float(np.mean(returns)), 3),
            "standard_error": round(float(np.std(returns, ddof=1) / np.sqrt(episodes)), 3),
        }
    if tasks.TASKS[task].ceiling is not None:
        references["ceiling"] = {"mean": tasks.TASKS[task].ceiling, "standard_error": 0.0}
    if tasks.TASKS[task].score_scale is not None:
        scale = tasks.TASKS[task].score_scale()
        for name, value in ((scale.zero_name, scale.zero), (scale.one_name, scale.one)):
            references[f"{name} (exact)"] = {"mean": round(float(value), 3), "standard_error": 0.0}
    return references
