"""Pipelined PPO, one feature folder in RLlib's layout (docs/performance.md, "Pipelined PPO").

    from rl.learners.pipelined import PipelinedPPOConfig

    config = PipelinedPPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1)

- `config.py`: PipelinedPPOConfig and the PipelinedPPO algorithm (remote EnvRunners sample the
  next batch while the Learner updates; policy lag one update, `policy_lag`; the batch trimmed of
  what the Learner does not read before it crosses processes, `trim_for_learner`);
- `tests/`: the lag read from episodes (fast) and checked against the sampling weights (slow).
"""

from rl.learners.pipelined.config import (
    MAX_POLICY_LAG,
    POLICY_LAG,
    PipelinedPPO,
    PipelinedPPOConfig,
    learner_info_keys,
    policy_lag,
    trim_for_learner,
)

__all__ = [
    "MAX_POLICY_LAG",
    "POLICY_LAG",
    "PipelinedPPO",
    "PipelinedPPOConfig",
    "learner_info_keys",
    "policy_lag",
    "trim_for_learner",
]
