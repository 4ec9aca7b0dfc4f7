"""The memoryless baseline as a learner: PPO with an MLP on exactly what the agent sees now.

    ./bazelw run //experiments/mess3:memoryless_agent -- --smoke
    ./bazelw run //experiments/mess3:memoryless_agent               # reward_only's budget

The same env, observation (last token and previous action), PPO hyperparameters and budget as
reward_only; only the module differs: an MLPModel, which has no memory, so the best it can do is
the best memoryless policy (score 0 in control_scores; passive at the defaults). It tells how much
of what reward_only's Transformer earns needs memory, and whether PPO finds the memoryless optimum.
No probes: an MLP has no residual stream over time.
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters
from rl.learners.models import MLPModel

HYPERPARAMETERS = Hyperparameters(task.PPO_HYPERPARAMETERS, ranges=task.HYPERPARAMETER_RANGES)  # what --set may change


def run(context):
    config = task.ppo_config(
        smoke=context.smoke,
        module_class=MLPModel,
        model_config=task.MLP_MODEL_CONFIG,
        hyperparameters=context.hyperparameters,
    )
    return stages.run(context, config, budget=stages.MAIN_JOB, random_network=None)
