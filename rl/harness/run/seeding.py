"""One root seed, named child streams that are never handed out twice (see docs/seeding.md).

    seeds = SeedStreams(root=42)
    seeds.integer("rllib")            # int in [0, 2**31): what the runner passes to .debugging(seed=)
    rng = seeds.generator("probe_split")   # numpy Generator for a recipe's own sampling
    seeds.integer("rllib")            # SeedStreamError: the stream was already used
    seeds.issued()                    # {"rllib": {...}, "probe_split": {...}}, recorded in the manifest

A stream's value depends only on the root seed and its name (its spawn key is derived
from the name's sha256), so adding a new consumer never shifts the seeds of the others.
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from rl.harness.errors import UsageError

# Seeds handed to libraries that want a signed 32-bit int (RLlib, torch, gymnasium).
_INT_BOUND = 2**31


class SeedStreamError(UsageError, ValueError):
    """A stream name was requested twice or is not a plain name."""


def spawn_key(name: str) -> tuple[int, ...]:
    """The SeedSequence spawn key of stream `name`: its sha256 as eight 32-bit words."""
    digest = hashlib.sha256(name.encode()).digest()
    return tuple(int.from_bytes(digest[index : index + 4], "little") for index in range(0, 32, 4))


class SeedStreams:
    """Named, independent, use-once `numpy.random.SeedSequence` children of one root seed."""

    def __init__(self, root: int):
        if not isinstance(root, int) or isinstance(root, bool) or root < 0:
            raise SeedStreamError(f"root seed must be a non-negative int, got {root!r}; pass --seed N")
        self.root = root
        self._issued: dict[str, dict] = {}
        self._lock = threading.Lock()

    def sequence(self, name: str, *, kind: str = "sequence") -> np.random.SeedSequence:
        """The child SeedSequence of stream `name` (each name once per run)."""
        if not name or any(char.isspace() for char in name):
            raise SeedStreamError(f"stream name {name!r} must be a non-empty name without spaces")
        with self._lock:
            if name in self._issued:
                raise SeedStreamError(
                    f"seed stream {name!r} was already used in this run; give each consumer its own name"
                    " (e.g. 'env/train' and 'env/eval')"
                )
            self._issued[name] = {"kind": kind, "spawn_key": list(spawn_key(name))}
        return np.random.SeedSequence(entropy=self.root, spawn_key=spawn_key(name))

    def integer(self, name: str) -> int:
        """A seed in [0, 2**31) for a library that takes an int (RLlib, torch, gymnasium)."""
        value = int(self.sequence(name, kind="integer").generate_state(1, dtype=np.uint32)[0]) % _INT_BOUND
        with self._lock:
            self._issued[name]["value"] = value
        return value

    def integers(self, name: str, count: int) -> list[int]:
        """`count` distinct-stream seeds from one name (e.g. one per Tune trial)."""
        if count < 1:
            raise SeedStreamError(f"count must be >= 1, got {count}")
        children = self.sequence(name, kind="integers").spawn(count)
        values = [int(child.generate_state(1, dtype=np.uint32)[0]) % _INT_BOUND for child in children]
        with self._lock:
            self._issued[name]["values"] = values
        return values

    def generator(self, name: str) -> np.random.Generator:
        """A numpy Generator (PCG64) on stream `name`."""
        return np.random.Generator(np.random.PCG64(self.sequence(name, kind="generator")))

    def issued(self) -> dict[str, dict]:
        """Every stream used so far, with its spawn key and int value(s): recorded in the manifest."""
        with self._lock:
            return {name: dict(entry) for name, entry in self._issued.items()}
