"""rl.devops."""
