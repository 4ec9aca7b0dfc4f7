"""The oracle rung: PPO with an MLP that observes the exact belief, so memory is given, not learned.

    ./bazelw run //experiments/mess3:oracle_belief_separate_critic -- --smoke
    ./bazelw run //experiments/mess3:oracle_belief_separate_critic                # reward_only's budget
    ./bazelw run //experiments/mess3:oracle_belief_separate_critic -- --set model/vf_share_layers=true   # shared critic

The same env dynamics, PPO hyperparameters and budget as reward_only and memoryless_agent; the module is
memoryless_agent's MLP, and its observation is the env's exact filtered belief over the current
hidden state (controlled_mess3.BELIEF_OBSERVATION) instead of the last token and action. The
belief is all the belief-optimal reference acts on, so control_scores' 1 is within its reach: if
it falls short, what limits the agents is PPO or its criterion, not memory. No probes: the input
already is the belief.

The value head reads an MLP of its own (`model/vf_share_layers` False), so the value loss does
not shape the layers the policy reads: with one shared MLP (`--set model/vf_share_layers=true`,
recorded runs name that variant `experiments.mess3.oracle_belief`) the oracle wandered between 0.22 and
0.95 of the memory gap across seeds (README.md, NOTEBOOK.md).
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters
from rl.learners.models import MLPModel

SHARE_LAYERS = "model/vf_share_layers"
HYPERPARAMETERS = Hyperparameters(
    {**task.PPO_HYPERPARAMETERS, SHARE_LAYERS: False}, ranges=task.HYPERPARAMETER_RANGES
)  # what --set may change


def run(context):
    model_config = {**task.MLP_MODEL_CONFIG, "vf_share_layers": context.hyperparameters[SHARE_LAYERS]}
    config = task.ppo_config(
        smoke=context.smoke,
        module_class=MLPModel,
        model_config=model_config,
        observation=task.BELIEF_OBSERVATION,
        hyperparameters=context.hyperparameters,
    )
    return stages.run(context, config, budget=stages.MAIN_JOB, random_network=None)
