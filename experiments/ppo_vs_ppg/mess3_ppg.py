"""PPG on Mess3 occupancy control (PPGTransformerModel, the detach design), PPO's hyperparameters plus an auxiliary phase.

    ./bazelw run //experiments/ppo_vs_ppg:mess3_ppg -- --smoke

Hyperparameters and budget: task/tasks.py; the run and its figures: task/stages.py.
"""

from experiments.ppo_vs_ppg.task import stages, tasks

TASK = "Mess3Control"
HYPERPARAMETERS = tasks.ppg_hyperparameters(TASK)


def run(context):
    return stages.run(context, TASK, "PPG", overrides=tasks.ppg_overrides(context.hyperparameters))
