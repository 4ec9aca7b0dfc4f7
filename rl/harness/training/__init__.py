"""rl.harness.training: Training: the one run lifecycle, the direct/Tune/in-process/several-agents runners, sampling connectors, hardware, Ray clusters (Ray lives only here)."""
