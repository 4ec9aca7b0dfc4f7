"""reward_only with a value Transformer of its own: the policy's encoder sees only the policy loss.

    ./bazelw run //experiments/mess3:reward_only_separate_critic -- --smoke
    ./bazelw run //experiments/mess3:reward_only_separate_critic              # reward_only's budget

reward_only (the same task, PPO, Transformer size, budget and stages) with `vf_share_layers`
False: the value head reads a second TransformerModel encoder (`critic_encoder`), so the value
loss no longer shapes the encoder the policy reads (EnvRunners run both encoders, TransformerModel's
docstring). The probes read both encoders, each against random networks of this architecture
(`residual_k`: the policy's; `critic_encoder/residual_k`: the critic's). The questions it adds
(critic_study): is the shared critic what keeps some reward_only seeds at the memoryless level,
and does the belief geometry come from the value loss (then the critic's encoder has it and the
policy's less) or from the policy loss?
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters

HYPERPARAMETERS = Hyperparameters(
    {**task.PPO_HYPERPARAMETERS, **task.TRANSFORMER_HYPERPARAMETERS},
    check=task.check_transformer_hyperparameters,
    ranges=task.HYPERPARAMETER_RANGES,
)  # what --set may change

MODEL_CONFIG = {**task.MODEL_CONFIG, "vf_share_layers": False}


def run(context):
    model_config = task.transformer_config(context.hyperparameters, MODEL_CONFIG)
    config = task.ppo_config(smoke=context.smoke, model_config=model_config, hyperparameters=context.hyperparameters)
    return stages.run(
        context,
        config,
        budget=stages.MAIN_JOB,
        random_network=lambda seed: task.build_random_network(seed, model_config=model_config),
    )


def probe_plan(smoke: bool):
    """For `bazel run //rl/analysis:probe -- <run-id>`: the plan the run probed itself with."""
    return task.probe_plan_for(smoke=smoke)
