"""The names of the counters and curves every run's metrics rows carry (RLlib's), importing nothing.

    from rl.harness.run import metric_keys

    row[metric_keys.ITERATION], row[metric_keys.ENV_STEPS], row.get(metric_keys.RETURN)

Analysis and experiments read rows by these names without importing Ray or the runners.
"""

ITERATION = "training_iteration"
ENV_STEPS = "num_env_steps_sampled_lifetime"
RETURN = "env_runners/episode_return_mean"
EPISODE_LENGTH = "env_runners/episode_len_mean"
ITERATION_SECONDS = "time_this_iter_s"
