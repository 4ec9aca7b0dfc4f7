"""rl.learners."""
