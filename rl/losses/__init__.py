"""rl.losses."""
