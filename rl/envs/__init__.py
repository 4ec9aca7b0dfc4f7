"""rl.envs."""
