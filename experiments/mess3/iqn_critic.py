"""The reward_only recipe with a distributional critic: PPO whose value head is an IQN.

    ./bazelw run //experiments/mess3:iqn_critic -- --smoke

The composition pattern: the science of controlled Mess3 (environment, transformer, PPO hyperparameters,
probes) comes from controlled_mess3.py unchanged; only two parts are swapped, each from the library:
- the module: `IQNValueMixin` on `TransformerModel` (the value head becomes an implicit quantile
  network over the same residual stream, its config in model_config["iqn_value"]);
- the learner: `IQNPPOTorchLearner` (PPO's squared-error value loss is replaced by the quantile Huber
  loss on the same lambda returns; weight in learner_config_dict["iqn_value/loss_coefficient"]).
The question it adds: does a critic that must model the return distribution, not just its mean,
change how well the shared residual stream encodes the belief (compare its belief_geometry.json
with reward_only's)?
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.learners import IQNPPOTorchLearner
from rl.learners.models import TransformerModel
from rl.learners.quantile_critic import IQNValueMixin

BUDGET = stages.Budget(smoke_env_steps=3 * 1024, full_env_steps=150_000)
MODEL_CONFIG = {**task.MODEL_CONFIG, "iqn_value": {"train_quantiles": 16, "value_quantiles": 32, "n_cosines": 32}}
IQN_NAMESPACE = IQNValueMixin.model_config_section
LEARNER_CONFIG = {f"{IQN_NAMESPACE}/loss_coefficient": 0.5, f"{IQN_NAMESPACE}/huber_kappa": 1.0}


class IQNTransformerModel(IQNValueMixin, TransformerModel):
    """TransformerModel whose value head is an IQN (the mixin must come first)."""


def run(context):
    config = task.ppo_config(
        smoke=context.smoke,
        module_class=IQNTransformerModel,
        model_config=MODEL_CONFIG,
        learner_class=IQNPPOTorchLearner,
        learner_config=LEARNER_CONFIG,
        vf_loss_coeff=0.0,
    )  # the quantile loss replaces PPO's value loss
    metrics = f"learners/default_policy/{IQN_NAMESPACE}"
    context.recorder.summarize(f"{metrics}/loss", f"{metrics}/quantile_spread", f"{metrics}/crossing_fraction")
    return stages.run(
        context,
        config,
        budget=BUDGET,
        random_network=lambda seed: task.build_random_network(
            seed, module_class=IQNTransformerModel, model_config=MODEL_CONFIG
        ),
    )


def probe_plan(smoke: bool):
    """For `bazel run //rl/analysis:probe -- <run-id>`: the plan the run probed itself with."""
    return task.probe_plan_for(smoke=smoke)
