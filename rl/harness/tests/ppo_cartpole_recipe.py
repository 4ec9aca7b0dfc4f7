"""A short real RLlib recipe for the slow tests: PPO on CartPole-v1, direct or Tune.

PPO_RECIPE_RUNNER=tune switches to the Tune runner (two seeds); PPO_RECIPE_ITERATIONS sets the
budget (smoke: 2).
"""

import os

from ray.rllib.algorithms.ppo import PPOConfig

from rl.harness import runners


def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=400, minibatch_size=100, num_epochs=2)
    )
    iterations = 2 if context.smoke else int(os.environ.get("PPO_RECIPE_ITERATIONS", "6"))
    stop = runners.StopRule(training_iterations=iterations)
    if os.environ.get("PPO_RECIPE_RUNNER") == "tune":
        return runners.run_tune(context, config, stop=stop, num_seeds=2, checkpoint_every=2)
    return runners.run_direct(context, config, stop=stop, checkpoint_every=2)
