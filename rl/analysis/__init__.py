"""rl.analysis."""
