"""Does a transformer trained by PPO on reward alone represent the belief over Mess3's hidden states?

    ./bazelw run //experiments/mess3:reward_only -- --smoke    # every stage, minutes
    ./bazelw run //experiments/mess3:reward_only               # the full budget

Stages (task/stages.py): train a TransformerModel agent with PPO on controlled Mess3 (controlled_mess3.py),
saving the untrained network (step 0) and log-spaced checkpoints; score the last checkpoint against
the task's exact references (control_scores.py: 0 = best memoryless policy, 1 = belief-optimal);
then probe the residual stream of every checkpoint, and of randomly initialised networks of the
same architecture, with affine probes of the exact belief (belief_geometry.py).
Results: results/[smoke/]<run-id>/.
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters

HYPERPARAMETERS = Hyperparameters(
    {**task.PPO_HYPERPARAMETERS, **task.TRAINING_HYPERPARAMETERS, **task.TRANSFORMER_HYPERPARAMETERS},
    check=task.check_transformer_hyperparameters,
    ranges=task.HYPERPARAMETER_RANGES,
)


def ppo_config(context):
    """The recipe's PPO config with the run's --set hyperparameters applied."""
    return task.ppo_config(
        smoke=context.smoke,
        model_config=task.transformer_config(context.hyperparameters),
        hyperparameters=context.hyperparameters,
    )


def train(context, *, env_steps: int) -> dict:
    """The training stage alone (bench_throughput times it as is)."""
    return stages.train(context, ppo_config(context), env_steps=env_steps)


def run(context):
    model_config = task.transformer_config(context.hyperparameters)
    return stages.run(
        context,
        ppo_config(context),
        budget=stages.MAIN_JOB,
        random_network=lambda seed: task.build_random_network(seed, model_config=model_config),
    )


def probe_plan(smoke: bool):
    """For `bazel run //rl/analysis:probe -- <run-id>`: the plan the run probed itself with."""
    return task.probe_plan_for(smoke=smoke)
