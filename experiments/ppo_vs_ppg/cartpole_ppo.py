"""PPO on CartPole-v1 (fully observed; MLP 64x64, separate critic encoder): the comparison's baseline there.

    ./bazelw run //experiments/ppo_vs_ppg:cartpole_ppo -- --smoke     # one run; the study runs it per seed

Hyperparameters and budget: task/tasks.py; the run and its figures: task/stages.py.
"""

from experiments.ppo_vs_ppg.task import stages


def run(context):
    return stages.run(context, "CartPole-v1", "PPO")
