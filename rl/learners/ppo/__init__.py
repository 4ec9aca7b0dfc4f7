"""PPO Learners for the modules in rl.learners.models (imported through rl.learners)."""
