"""PPO vs PPG on Mess3 occupancy control alone, where acting well needs the belief.

    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg_mess3              # 3 seeds x 2 algorithms, 131k env steps each
    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg_mess3 -- --smoke

The Mess3Control half of ppo_vs_ppg (same settings, comparison.py), for a re-run after a change to
the task without re-running CartPole. At the control defaults the best memoryless policy earns
21.3 per episode and the belief-optimal one 30.6 (rl/envs/README.md); runs report their final
return and AUC also on that 0-1 scale.
"""

from experiments.ppo_vs_ppg import comparison

TASK = "Mess3Control"
SEEDS = {False: 3, True: 2}


def run(context):
    seeds = context.seeds.integers("runs", SEEDS[context.smoke])
    jobs = [comparison.Job(TASK, algorithm, seed) for algorithm in comparison.ALGORITHMS for seed in seeds]
    return comparison.run_comparison(context, jobs, question="PPO vs PPG on Mess3Control, same env-step budget and seeds")
