"""A tiny experiment for the probe command's tests: a TransformerModel PPO agent on passive Mess3.

`run` trains two iterations through the harness's direct runner (slow test); `probe_plan` is what
the probe command reads (fast and slow tests).
"""

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl.analysis.adapters import ContextProbing, ProbePlan, RolloutProbing
from rl.analysis.probes import ProbeOptions
from rl.analysis.tests.mess3_reference import Mess3Contexts, Mess3Env, Mess3TokenEnv
from rl.analysis.tests.tiny_modules import TRANSFORMER_CONFIG
from rl.harness import StopRule, run_direct
from rl.learners import ActorCriticPPOTorchLearner
from rl.learners.models import TransformerModel

HORIZON = 12


def run(context):
    config = (
        PPOConfig()
        .environment(Mess3TokenEnv, env_config={"horizon": HORIZON})
        .rl_module(rl_module_spec=RLModuleSpec(module_class=TransformerModel, model_config=dict(TRANSFORMER_CONFIG)))
        .training(train_batch_size_per_learner=240, minibatch_size=120, num_epochs=1)
        .learners(learner_class=ActorCriticPPOTorchLearner)
        .env_runners(num_env_runners=0)
    )
    return run_direct(context, config, stop=StopRule(training_iterations=2), checkpoint_every=1)


SMOKE_CONTEXT_LENGTH, CONTEXT_LENGTH = 5, 6


def probe_plan(smoke: bool) -> ProbePlan:
    return ProbePlan(
        contexts=ContextProbing(
            Mess3Contexts(),
            max_length=SMOKE_CONTEXT_LENGTH if smoke else CONTEXT_LENGTH,
            group_prefix_length=4,
            batch_size=256,
        ),
        rollouts=RolloutProbing(Mess3Env(HORIZON), target="belief", num_episodes=48, max_steps=HORIZON, batch_size=16),
        options=ProbeOptions(num_permutations=20, num_bootstrap=200),
    )
