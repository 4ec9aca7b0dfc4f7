"""Does PPG learn faster than PPO at the same env-step budget, on a fully and a partially observed task?

    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg                # the benchmark: 20 runs, ~11 min on 2 cores
    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg -- --smoke     # every stage on tiny budgets, ~1 min

Five seeds per (task, algorithm) (two in smoke), drawn from the run's seed and shared by PPO and
PPG, on CartPole-v1 (100k env steps) and Mess3 occupancy control (40,960 env steps); the tasks and
settings are in comparison.py. Each run is its own process (so its peak memory is its own), as many
at a time as the hardware profile has CPUs, and trains with the harness's in-process runner
(rl.harness.training.in_process: one local EnvRunner with 8 envs, seeded with the run's seed from the stream "runs").

Records (comparison.run_comparison): `comparison.json` and `learning_curves.png` in results/<run-id>/,
each curve in metrics.jsonl (one trial per run), the summary printed as JSON.
"""

from experiments.ppo_vs_ppg import comparison

SEEDS = {False: 5, True: 2}


def run(context):
    seeds = context.seeds.integers("runs", SEEDS[context.smoke])
    jobs = [comparison.Job(task, algorithm, seed) for task in comparison.TASKS for algorithm in comparison.ALGORITHMS
            for seed in seeds]
    return comparison.run_comparison(context, jobs, question="PPO vs PPG, same env-step budget and seeds")
