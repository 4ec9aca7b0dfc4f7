"""The oracle rung: PPO with an MLP that observes the exact belief, so memory is given, not learned.

    ./bazelw run //experiments/mess3:oracle_belief -- --smoke
    ./bazelw run //experiments/mess3:oracle_belief                # reward_only's budget

The same env dynamics, PPO settings and budget as reward_only and memoryless_agent; the module is
memoryless_agent's MLP, and its observation is the env's exact filtered belief over the current
hidden state (controlled_mess3.BELIEF_OBSERVATION) instead of the last token and action. The
belief is all the belief-optimal reference acts on, so control_scores' 1 is within its reach: if
it falls short, what limits the agents is PPO or its criterion, not memory. No probes: the input
already is the belief.
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters
from rl.learners.models import MLPModel

HYPERPARAMETERS = Hyperparameters(task.PPO_HYPERPARAMETERS)  # what --set may change


def run(context):
    config = task.ppo_config(smoke=context.smoke, module_class=MLPModel, model_config=task.MLP_MODEL_CONFIG,
                             observation=task.BELIEF_OBSERVATION, hyperparameters=context.hyperparameters)
    return stages.run(context, config, budget=stages.MAIN_JOB, random_network=None)
