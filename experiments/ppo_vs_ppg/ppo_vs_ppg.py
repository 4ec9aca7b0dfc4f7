"""Does PPG learn faster than PPO at the same env-step budget, on a fully and a partially observed task?

    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg                # the benchmark: 20 runs, ~15 min on 2 cores
    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg -- --smoke     # every stage on tiny budgets, ~1 min

Five seeds per (task, algorithm) (two in smoke), drawn from the run's seed and shared by PPO and
PPG, on CartPole-v1 (100k env steps) and Mess3 occupancy control (40,960 env steps); the tasks and
settings are in comparison.py. Each run is its own process (so its peak memory is its own), as many
at a time as the hardware profile has CPUs; that makes this recipe set each run's EnvRunner and seed
itself (one in-process EnvRunner, 8 envs), which the harness otherwise owns. A SIGINT or SIGTERM
cancels the runs not yet started, lets the running ones finish and records what finished.

Writes `comparison.json` (settings, seeds, reference-policy returns, per-task summary, every run's
curve) and `learning_curves.png` to results/<run-id>/, logs each curve to metrics.jsonl (one trial per
run) and prints the summary as JSON.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import time

from experiments.ppo_vs_ppg import comparison
from rl.analysis.plots import save_figure
from rl.harness import records

SEEDS = {False: 5, True: 2}
REFERENCE_EPISODES = {False: 1000, True: 20}
RESULTS_FILE = "comparison.json"
PLOT_FILE = "learning_curves.png"


def run(context):
    seeds = context.seeds.integers("runs", SEEDS[context.smoke])
    jobs = [(task, algorithm, seed) for task in comparison.TASKS for algorithm in comparison.ALGORITHMS
            for seed in seeds]
    workers = max(1, min(context.hardware.num_cpus, len(jobs)))
    print(f"ppo_vs_ppg: {len(jobs)} runs, {workers} at a time", flush=True)
    records_by_job, failures = _train_all(context, jobs, workers)
    finished = [records_by_job[job] for job in jobs if job in records_by_job]

    reference_seed = context.seeds.integer("reference_policies")
    references = {task: comparison.reference_returns(task, episodes=REFERENCE_EPISODES[context.smoke],
                                                     seed=reference_seed)
                  for task in comparison.TASKS}
    summary = comparison.summarise(finished)
    report = {
        "question": __doc__.splitlines()[0],
        "settings": {task: {algorithm: comparison.settings_of(task, algorithm, smoke=context.smoke)
                            for algorithm in comparison.ALGORITHMS} for task in comparison.TASKS},
        "seeds": seeds,
        "complete": len(finished) == len(jobs),
        "failed": [{"task": task, "algorithm": algorithm, "seed": seed, "error": error}
                   for (task, algorithm, seed), error in failures.items()],
        "references": references,
        "summary": summary,
        "runs": finished,
    }
    records.write_json_atomically(os.path.join(context.results_dir, RESULTS_FILE), report)
    if finished:
        title = f"PPO vs PPG, {len(seeds)} seeds each ({context.run_id})"
        save_figure(comparison.learning_curves_figure(finished, references, title=title),
                    os.path.join(context.results_dir, PLOT_FILE))
    print(json.dumps({"summary": summary, "references": references}, indent=1))
    print(f"results: {context.results_dir}")
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(jobs)} runs failed (errors in {RESULTS_FILE}): "
                           + "; ".join(f"{job}: {error}" for job, error in failures.items()))
    return {"summary": summary, "complete": report["complete"]}


def _train_all(context, jobs, workers):
    """Runs `jobs` in fresh processes; returns ({job: record} of those that finished, {job: error})."""
    started = time.monotonic()
    finished, failed = {}, {}
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=spawn, max_tasks_per_child=1) as pool:
        futures = {pool.submit(comparison.train_one, task, algorithm, seed=seed, smoke=context.smoke): (task, algorithm, seed)
                   for task, algorithm, seed in jobs}
        stopping = False
        for future in concurrent.futures.as_completed(futures):
            if future.cancelled():
                continue
            task, algorithm, seed = job = futures[future]
            done = f"[{len(finished) + len(failed) + 1}/{len(jobs)}] {task} {algorithm} seed {seed}"
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
                print("ppo_vs_ppg: stop requested; cancelling the runs not started", flush=True)
                for pending in futures:
                    pending.cancel()
    return finished, failed


def _log_curve(context, record):
    trial = f"{record['task']}/{record['algorithm']}/seed{record['seed']}"
    for iteration, (env_steps, episode_return) in enumerate(record["curve"], start=1):
        context.recorder.log_metrics({"trial_id": trial, "training_iteration": iteration,
                                      "num_env_steps_sampled_lifetime": env_steps,
                                      "env_runners/episode_return_mean": episode_return}, trial=trial)
