"""What a probe reads: activations per layer, the targets, and the groups to split and resample by.

    from rl.analysis.probes import ProbeDataset

    dataset = ProbeDataset(
        activations={"layer_0": a0, "layer_1": a1},   # each (samples, width)
        targets=beliefs,                               # (samples, target_dim)
        groups=episode_ids,                            # (samples,): one id per episode / context tree
        distribution=SamplingDistribution.process_rollouts(...),
        target_name="belief",
    )

Rows of one group must never be split between train and test (samples within an episode are
correlated), so every collector gives each row the id of the episode or context tree it belongs to.
Rows of a group are kept in their collection order: the permutation null aligns groups row by row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from rl.analysis.probes.distribution import SamplingDistribution


@dataclasses.dataclass(frozen=True)
class ProbeDataset:
    activations: Mapping[str, np.ndarray]
    targets: np.ndarray
    groups: np.ndarray
    distribution: SamplingDistribution
    target_name: str

    def __post_init__(self):
        if not self.activations:
            raise ValueError("a probe dataset needs activations of at least one layer")
        num_samples = len(self.targets)
        if np.ndim(self.targets) != 2:
            raise ValueError(f"targets must be (samples, target_dim), got shape {np.shape(self.targets)}")
        if np.shape(self.groups) != (num_samples,):
            raise ValueError(
                f"groups must hold one id per target row ({num_samples}), got shape {np.shape(self.groups)}"
            )
        for layer, activations in self.activations.items():
            if np.ndim(activations) != 2 or len(activations) != num_samples:
                raise ValueError(
                    f"activations of {layer!r} must be ({num_samples}, width) to match the targets, "
                    f"got shape {np.shape(activations)}"
                )

    @property
    def num_samples(self) -> int:
        return len(self.targets)

    @property
    def layers(self) -> list[str]:
        return list(self.activations)
