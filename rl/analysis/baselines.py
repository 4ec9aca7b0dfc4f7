"""Randomly initialised networks as a probe baseline: what the architecture alone gives a probe.

    from rl.analysis.baselines import probe_random_networks, random_network

    networks = [random_network(lambda: TransformerModel(observation_space=..., action_space=...,
                                                        model_config=config), seed)
                for seed in context.seeds.integers("random_networks", 3)]
    probe_seed = probing.probe_seed(context.seeds)    # drawn once: the checkpoints' probes use it too
    probes = probe_random_networks(found, plan, networks, folder=artifacts_dir / "random_networks",
                                   seed=probe_seed)
    probes[0].reports["uniform_contexts"].layers     # as for a trained checkpoint

Each network is saved as an RLModule checkpoint (`<folder>/random_init_<i>`) and probed by the
probe loop (rl.analysis.probing) with the run's probe seed, so trained and random networks meet the same
contexts, episode seeds, splits and resamples (paired comparisons).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence

import numpy as np
import torch

from rl.analysis import probing
from rl.analysis.adapters import ProbePlan
from rl.analysis.checkpoints import RunArtifacts, RunCheckpoint


def random_network(build: Callable[[], torch.nn.Module], seed: int) -> torch.nn.Module:
    """`build()` with torch seeded by `seed` (the caller's RNG state untouched), in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = build()
    return module.eval()


def probe_random_networks(
    found: RunArtifacts,
    plan: ProbePlan,
    networks: Sequence,
    *,
    folder: pathlib.Path,
    seed: np.random.SeedSequence,
    module_id: str = "default_policy",
    show_progress: bool = True,
) -> list[probing.CheckpointProbes]:
    """Probes of each network in `networks` (RLModules), saved under `folder`, with the run's probe seed."""
    checkpoints = []
    for index, module in enumerate(networks):
        path = pathlib.Path(folder) / f"random_init_{index}"
        module.save_to_path(str(path))
        checkpoints.append(RunCheckpoint(path, iteration=None, env_steps=None))
    return probing.probe_checkpoints(
        dataclasses.replace(found, checkpoints=checkpoints),
        plan,
        seed=seed,
        module_id=module_id,
        show_progress=show_progress,
    )
