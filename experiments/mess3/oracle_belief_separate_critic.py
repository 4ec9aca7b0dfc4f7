"""The oracle rung with its own value network: is the shared critic what keeps PPO from the belief optimum?

    ./bazelw run //experiments/mess3:oracle_belief_separate_critic -- --smoke
    ./bazelw run //experiments/mess3:oracle_belief_separate_critic

oracle_belief (an MLP on the exact belief, the same PPO, env dynamics and budget) with
`vf_share_layers` False: the value head reads an MLP of its own, so the value loss no longer
shapes the layers the policy reads. At 2^18 env steps this lifted the greedy policy from
0.74-0.76 to 0.92-0.93 of the memory gap in three seeds (README.md, "The oracle rung").
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters
from rl.learners.models import MLPModel

HYPERPARAMETERS = Hyperparameters(task.PPO_HYPERPARAMETERS)  # what --set may change

MODEL_CONFIG = {**task.MLP_MODEL_CONFIG, "vf_share_layers": False}


def run(context):
    config = task.ppo_config(smoke=context.smoke, module_class=MLPModel, model_config=MODEL_CONFIG,
                             observation=task.BELIEF_OBSERVATION, hyperparameters=context.hyperparameters)
    return stages.run(context, config, budget=stages.MAIN_JOB, random_network=None)
