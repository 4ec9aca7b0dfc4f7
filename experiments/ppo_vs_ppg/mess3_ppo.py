"""PPO on Mess3 occupancy control (partially observed; controlled_mess3's TransformerModel and PPO hyperparameters).

    ./bazelw run //experiments/ppo_vs_ppg:mess3_ppo -- --smoke

Hyperparameters and budget: task/tasks.py; the run and its figures: task/stages.py.
"""

from experiments.ppo_vs_ppg.task import stages


def run(context):
    return stages.run(context, "Mess3Control", "PPO")
