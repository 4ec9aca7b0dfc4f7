"""PPO with the library's MLP module on Mess3 occupancy control, from belief observations.

The example experiment of the template: a recipe is a module with `run(context)`;
scientific choices (environment, model, budget) live here, the harness owns
everything operational (seeds, records, checkpoints, resume).
"""

from ray import tune
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl.envs.mess3 import envs as mess3_envs
from rl.harness.training import runners
from rl.learners.models import MLPModel

ENV_NAME = "mess3_control_belief"

SMOKE_ITERATIONS = 1
FULL_ITERATIONS = 50


def make_env(env_config):
    # Registered with Ray (not only Gymnasium) so remote EnvRunners can build it too.
    return mess3_envs.mess3_env("control", observation=("belief",), **env_config)


def run(context):
    tune.register_env(ENV_NAME, make_env)
    config = (
        PPOConfig()
        .environment(ENV_NAME)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MLPModel, model_config={"hidden_sizes": [32, 32]}))
        .training(train_batch_size_per_learner=512, minibatch_size=128, num_epochs=2)
    )
    iterations = SMOKE_ITERATIONS if context.smoke else FULL_ITERATIONS
    return runners.run_direct(context, config, stop=runners.StopRule(training_iterations=iterations),
                              checkpoint_every=10)
