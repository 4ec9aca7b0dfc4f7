"""rl-harness: reproducible RL experiments on RLlib."""
