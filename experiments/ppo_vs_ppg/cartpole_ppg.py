"""PPG on CartPole-v1 (the detach design: one MLP 64x64 encoder), PPO's hyperparameters plus the tuned auxiliary phase.

    ./bazelw run //experiments/ppo_vs_ppg:cartpole_ppg -- --smoke
    ./bazelw run //experiments/ppo_vs_ppg:cartpole_ppg -- --set ppg/beta_clone=3.0   # what ppg_tuning varies

Hyperparameters and budget: task/tasks.py; the run and its figures: task/stages.py.
"""

from experiments.ppo_vs_ppg.task import stages, tasks

TASK = "CartPole-v1"
HYPERPARAMETERS = tasks.ppg_hyperparameters(TASK)


def run(context):
    return stages.run(context, TASK, "PPG", overrides=tasks.ppg_overrides(context.hyperparameters))
