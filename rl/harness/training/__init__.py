"""rl.harness.training: the one lifecycle and its runners, sampling, hardware profiles and Ray clusters.

Code above the harness imports the modules `__all__` lists by their name (`from rl.harness.training
import configs`); the rest are this room's own. Nothing is imported here: Ray loads only with the
modules that need it (`cluster` does not).
"""

__all__ = ["agents", "batched_env_runner", "configs", "hardware", "in_process", "lifecycle", "runners"]
