"""A short real RLlib recipe for the slow tests: PPO on CartPole-v1, direct or Tune.

PPO_RECIPE_RUNNER=tune switches to the Tune runner (two seeds); PPO_RECIPE_ITERATIONS sets the
budget (smoke: 2), or PPO_RECIPE_ENV_STEPS a budget in env steps instead. PPO_RECIPE_LATE_TRIAL_S makes the second Tune trial to finish its first
iteration wait that long before reporting it (a trial slowed down by load), coordinated through
files in PPO_RECIPE_MARKER_DIR: `first` (made by the other trial), then `late` (it waits now).
"""

import os
import time

from ray.rllib.algorithms.ppo import PPOConfig

from rl.harness.training import runners

_REPORTED = []  # per process: each Tune trial is its own actor process


def _second_trial_reports_late(**_):
    """RLlib on_train_result callback (in the trial's process): only the first call of each trial counts."""
    if _REPORTED:
        return
    _REPORTED.append(True)
    markers = os.environ["PPO_RECIPE_MARKER_DIR"]
    try:  # the first trial here creates the marker and goes on; the second one waits
        os.close(os.open(os.path.join(markers, "first"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        open(os.path.join(markers, "late"), "w").close()
        time.sleep(float(os.environ["PPO_RECIPE_LATE_TRIAL_S"]))


def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=400, minibatch_size=100, num_epochs=2)
    )
    if os.environ.get("PPO_RECIPE_LATE_TRIAL_S"):
        config = config.callbacks(on_train_result=_second_trial_reports_late)
    iterations = 2 if context.smoke else int(os.environ.get("PPO_RECIPE_ITERATIONS", "6"))
    env_steps = os.environ.get("PPO_RECIPE_ENV_STEPS")
    stop = runners.StopRule(env_steps=int(env_steps)) if env_steps else runners.StopRule(training_iterations=iterations)
    if os.environ.get("PPO_RECIPE_RUNNER") == "tune":
        return runners.run_tune(context, config, stop=stop, num_seeds=2, checkpoint_every=2)
    return runners.run_direct(context, config, stop=stop, checkpoint_every=2)
