"""Collecting activations to probe: all token contexts, or episodes a policy plays.

from rl.analysis.rollouts import collect_rollouts, context_dataset

uniform = context_dataset(AnalysisView(module), context_adapter, max_length=10,
                          group_prefix_length=4, batch_size=2048)
weighted = collect_rollouts(module, env_adapter, num_episodes=256, max_steps=64, seed=seed,
                            batch_size=64, policy="iter_000010").probe_dataset("belief")
"""

from rl.analysis.rollouts.episodes import Rollouts, collect_rollouts
from rl.analysis.rollouts.token_contexts import context_dataset

__all__ = ["Rollouts", "collect_rollouts", "context_dataset"]
