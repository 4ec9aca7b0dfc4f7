"""The reward_only recipe trained by Phasic Policy Gradient instead of PPO.

    ./bazelw run //experiments/mess3:ppg -- --smoke

The composition pattern again (compare iqn_critic.py): the science of controlled Mess3 comes from
controlled_mess3.py unchanged; swapped are the algorithm (`PPGConfig` from rl.learners: PPO plus an
auxiliary phase every `policy_iterations_per_aux` updates, with its own PPGTorchLearner) and the
module (`PPGTransformerModel`: `PPGAuxiliaryValueHead` on `TransformerModel`, the detach design,
where PPO's value loss no longer shapes the shared encoder and an auxiliary value head trains it
in the auxiliary phases, under a policy-cloning KL). The question it adds: with the value loss moved out of the policy
phase, does the residual stream encode the belief more or less than under PPO?
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.learners import PPGConfig
from rl.learners.ppg import PPGTransformerModel

# Smoke: three updates, the auxiliary phase runs after the second.
BUDGET = stages.Budget(smoke_env_steps=3 * 1024, full_env_steps=150_000)
# Smaller than the paper's N_pi = 32 so that the full budget (~73 updates) holds several phases.
PPG_SETTINGS = {True: {"policy_iterations_per_aux": 2, "aux_epochs": 2, "aux_minibatch_size": 512},
                False: {"policy_iterations_per_aux": 16, "aux_epochs": 6, "aux_minibatch_size": 1024}}


def run(context):
    config = task.ppo_config(smoke=context.smoke, algorithm=PPGConfig, module_class=PPGTransformerModel,
                             learner_class=None).training(**PPG_SETTINGS[context.smoke])
    return stages.run(context, config, budget=BUDGET,
                      random_network=lambda seed: task.build_random_network(seed, module_class=PPGTransformerModel))


def probe_plan(smoke: bool):
    """For `bazel run //rl/analysis:probe -- <run-id>`: the plan the run probed itself with."""
    return task.probe_plan_for(smoke=smoke)
