"""Named child streams of a caller's seed sequence (a harness stream, usually).

    from rl.analysis.seeds import child_stream

    probe_seed = context.seeds.sequence("probe/uniform_contexts")   # rl.harness.run.seeding
    split_rng = np.random.default_rng(child_stream(probe_seed, "split"))

A child depends only on the parent's entropy and spawn key and on its name (the harness's
name -> spawn-key hash), never on how often the parent was used: reusing one parent sequence for
several checkpoints gives them the same splits, permutations and episodes (paired comparisons).
"""

from __future__ import annotations

import numpy as np

from rl.harness.run import seeding


def child_stream(parent: np.random.SeedSequence, name: str) -> np.random.SeedSequence:
    return np.random.SeedSequence(parent.entropy, spawn_key=(*parent.spawn_key, *seeding.spawn_key(name)))


def describe(seed: np.random.SeedSequence) -> dict:
    """What a report records to reproduce `seed`."""
    return {"entropy": str(seed.entropy), "spawn_key": [int(word) for word in seed.spawn_key]}
