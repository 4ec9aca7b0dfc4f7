"""rl.harness."""
