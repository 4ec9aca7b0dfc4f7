"""The reward_only recipe plus an auxiliary loss: predict the token each step will emit.

    ./bazelw run //experiments/mess3:next_token_aux -- --smoke    # every stage, minutes
    ./bazelw run //experiments/mess3:next_token_aux               # reward_only's budget

The composition pattern (compare iqn_critic.py): the science of controlled Mess3 and reward_only's
stages (task/stages.py: train, score, probe) are unchanged; swapped are two parts, each from the library:
- the module: `NextTokenAuxHead` on `TransformerModel`, a linear head over the shared residual
  stream and the one-hot of the action taken (the action tilts the transition that emits the
  token), its config in model_config["next_token_aux"];
- the learner: `NextTokenAuxPPOLearner`, PPO plus the cross-entropy of that head against the
  token in the env's step info (info["token"]), weight in
  learner_config_dict["next_token_aux/loss_coefficient"].
The question it adds: the belief is exactly what next-token prediction needs, so does a loss that
asks for it make the residual stream encode the belief better than reward alone (compare its
belief_geometry.json with reward_only's, at the same budget)?
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters
from rl.learners import NextTokenAuxPPOLearner
from rl.learners.models import NextTokenAuxHead, NextTokenAuxTransformerModel

HYPERPARAMETERS = Hyperparameters(
    {**task.PPO_HYPERPARAMETERS, **task.TRANSFORMER_HYPERPARAMETERS},
    check=task.check_transformer_hyperparameters,
    ranges=task.HYPERPARAMETER_RANGES,
)  # what --set may change

NAMESPACE = NextTokenAuxHead.model_config_section
MODEL_CONFIG = {**task.MODEL_CONFIG, NAMESPACE: {"num_tokens": 3}}  # Mess3's alphabet
# The value loss's weight (vf_loss_coeff 0.5): the other term that trains the shared encoder
# without asking for the policy; the cross-entropy starts near log 3 = 1.1 nats.
LEARNER_CONFIG = {f"{NAMESPACE}/loss_coefficient": 0.5}


def random_network(seed: int, model_config=None):
    """An untrained module of the trained class: its encoder is drawn before the head, as TransformerModel's."""
    return task.build_random_network(
        seed, module_class=NextTokenAuxTransformerModel, model_config=model_config or MODEL_CONFIG
    )


def run(context):
    model_config = task.transformer_config(context.hyperparameters, MODEL_CONFIG)
    config = task.ppo_config(
        smoke=context.smoke,
        module_class=NextTokenAuxTransformerModel,
        model_config=model_config,
        learner_class=NextTokenAuxPPOLearner,
        learner_config=LEARNER_CONFIG,
        hyperparameters=context.hyperparameters,
    )
    metrics = f"learners/default_policy/{NAMESPACE}"
    context.recorder.summarize(f"{metrics}/loss", f"{metrics}/accuracy")
    return stages.run(
        context, config, budget=stages.MAIN_JOB, random_network=lambda seed: random_network(seed, model_config)
    )


def probe_plan(smoke: bool):
    """For `bazel run //rl/analysis:probe -- <run-id>`: the plan the run probed itself with."""
    return task.probe_plan_for(smoke=smoke)
