"""Affine belief probes with baselines and controls; see README.md in this folder for the protocol.

import numpy as np
from rl.analysis.probes import ProbeDataset, SamplingDistribution, probe_layers

report = probe_layers(dataset, seed=np.random.SeedSequence(42))
report.write(path)
"""

from rl.analysis.probes.affine import AffineDesign, AffineProbe, ProbeScore, fit_affine_probe, score_predictions
from rl.analysis.probes.dataset import ProbeDataset
from rl.analysis.probes.distribution import (
    PROCESS_ROLLOUTS,
    UNIFORM_CONTEXTS,
    DistributionMismatchError,
    SamplingDistribution,
    require_comparable,
)
from rl.analysis.probes.report import LayerResult, ProbeOptions, ProbeReport, metric_table, probe_layers

__all__ = [
    "PROCESS_ROLLOUTS",
    "UNIFORM_CONTEXTS",
    "AffineDesign",
    "AffineProbe",
    "DistributionMismatchError",
    "LayerResult",
    "ProbeDataset",
    "ProbeOptions",
    "ProbeReport",
    "ProbeScore",
    "SamplingDistribution",
    "fit_affine_probe",
    "metric_table",
    "probe_layers",
    "require_comparable",
    "score_predictions",
]
