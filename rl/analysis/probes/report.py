"""Per-layer affine probes with their baselines and controls, as one JSON-able report.

    import numpy as np
    from rl.analysis.probes import ProbeOptions, probe_layers, metric_table

    report = probe_layers(dataset, seed=np.random.SeedSequence(42), options=ProbeOptions(num_permutations=200))
    report.write("results/<run-id>/probe_report.json")
    for layer in report.layers:
        print(layer.layer, layer.test.r2, layer.bootstrap["r2"], layer.permutation_null["p_value"])
    metric_table([report_at_step_1, report_at_step_2], "r2")   # {"layer_0": [..., ...], ...}

For each layer, with one split (whole groups held out) shared by all layers:
- `test`: the probe fitted on train, scored on held-out rows (`mse`, `target_variance`, `r2`);
- `train`: the same probe on its own training rows (a large gap to `test` means overfitting);
- `baseline`: predicting the training mean of the targets (its `r2` is about 0);
- `shuffle_control`: a probe fitted on row-shuffled training targets, scored on the true
  held-out targets (about 0, slightly below: what a probe of this width fits to noise);
- `bootstrap`: percentile interval of held-out `mse` and `r2`, resampling held-out groups;
- `permutation_null`: held-out `r2` of probes fitted with whole training groups' targets swapped
  between groups of equal size (keeps the targets' within-episode structure), and the p-value
  of the observed `r2` against it.
Controls and resamples are shared across layers, so layer differences are paired.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rl.analysis.probes.affine import AffineDesign, AffineProbe, ProbeScore, score_predictions
from rl.analysis.probes.dataset import ProbeDataset
from rl.analysis.probes.distribution import SamplingDistribution, require_comparable
from rl.analysis.probes.resampling import GroupPermuter, GroupSums, cluster_bootstrap, split_by_group
from rl.analysis.seeds import child_stream, describe
from rl.harness.run import records

SCHEMA_VERSION = 1
# Each source of randomness draws from its own named child of the caller's seed sequence.
_STREAMS = ("split", "shuffle_control", "bootstrap", "permutation_null")


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
    """How probes are fitted and controlled (all recorded in the report)."""

    test_fraction: float = 0.2
    ridge: float = 0.0  # least squares; a positive ridge is an explicit, recorded choice
    num_bootstrap: int = 1000
    confidence: float = 0.95
    num_permutations: int = 100  # the smallest attainable p-value is 1 / (num_permutations + 1)

    def __post_init__(self):
        for name in ("test_fraction", "confidence"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"ProbeOptions.{name} must be in (0, 1), got {getattr(self, name)}")
        if self.ridge < 0:
            raise ValueError(f"ProbeOptions.ridge must be >= 0 (0 is least squares), got {self.ridge}")
        for name in ("num_bootstrap", "num_permutations"):
            if getattr(self, name) < 1:
                raise ValueError(f"ProbeOptions.{name} must be >= 1, got {getattr(self, name)}")


@dataclasses.dataclass(frozen=True)
class LayerResult:
    layer: str
    probe: AffineProbe
    test: ProbeScore
    train: ProbeScore
    baseline: ProbeScore
    shuffle_control: ProbeScore
    bootstrap: Mapping[str, Any]
    permutation_null: Mapping[str, Any]

    def metric(self, name: str) -> float:
        """A flat metric: `r2`, `mse`, `target_variance`, `train_r2`, `baseline_mse`, `shuffle_r2`, ..."""
        flat = {
            **self.test.as_dict(),
            **{f"train_{key}": value for key, value in self.train.as_dict().items()},
            **{f"baseline_{key}": value for key, value in self.baseline.as_dict().items()},
            **{f"shuffle_{key}": value for key, value in self.shuffle_control.as_dict().items()},
            "null_p_value": self.permutation_null["p_value"],
        }
        if name not in flat:
            raise KeyError(f"unknown probe metric {name!r}; choose one of {sorted(flat)}")
        return flat[name]

    def as_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "test": self.test.as_dict(),
            "train": self.train.as_dict(),
            "baseline": self.baseline.as_dict(),
            "shuffle_control": self.shuffle_control.as_dict(),
            "bootstrap": dict(self.bootstrap),
            "permutation_null": dict(self.permutation_null),
            "probe": {
                "weights": self.probe.weights.tolist(),
                "bias": self.probe.bias.tolist(),
                "ridge": self.probe.ridge,
            },
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> LayerResult:
        probe = record["probe"]
        return cls(
            layer=record["layer"],
            probe=AffineProbe(np.asarray(probe["weights"]), np.asarray(probe["bias"]), probe["ridge"]),
            **{key: ProbeScore(**record[key]) for key in ("test", "train", "baseline", "shuffle_control")},
            bootstrap=record["bootstrap"],
            permutation_null=record["permutation_null"],
        )


@dataclasses.dataclass(frozen=True)
class ProbeReport:
    target_name: str
    distribution: SamplingDistribution
    options: ProbeOptions
    split: Mapping[str, int]
    seed: Mapping[str, Any]
    provenance: Mapping[str, Any]
    layers: Sequence[LayerResult]

    def layer(self, name: str) -> LayerResult:
        for result in self.layers:
            if result.layer == name:
                return result
        raise KeyError(f"no layer {name!r} in this report; it has {[r.layer for r in self.layers]}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "target_name": self.target_name,
            "distribution": self.distribution.as_dict(),
            "options": dataclasses.asdict(self.options),
            "split": dict(self.split),
            "seed": dict(self.seed),
            "provenance": dict(self.provenance),
            "layers": [result.as_dict() for result in self.layers],
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> ProbeReport:
        if record.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"probe report schema {record.get('schema_version')!r} is not {SCHEMA_VERSION}; "
                "re-run the probe with this version of rl.analysis"
            )
        return cls(
            target_name=record["target_name"],
            distribution=SamplingDistribution.from_dict(record["distribution"]),
            options=ProbeOptions(**record["options"]),
            split=record["split"],
            seed=record["seed"],
            provenance=record["provenance"],
            layers=[LayerResult.from_dict(layer) for layer in record["layers"]],
        )

    def write(self, path) -> None:
        """Writes the report as JSON, atomically."""
        records.write_json_atomically(path, self.as_dict())

    @classmethod
    def read(cls, path) -> ProbeReport:
        return cls.from_dict(records.read_json(path, "probe report"))


def probe_layers(
    dataset: ProbeDataset,
    *,
    seed: np.random.SeedSequence,
    options: ProbeOptions = ProbeOptions(),
    provenance: Mapping[str, Any] | None = None,
    before_each_layer: Callable[[], None] = lambda: None,
) -> ProbeReport:
    """Fits and controls one affine probe per layer of `dataset` (see the module docstring).

    `before_each_layer` runs before each layer's probe (the probe loop raises there to stop promptly).
    """
    streams = {name: child_stream(seed, name) for name in _STREAMS}
    split = split_by_group(
        dataset.groups, test_fraction=options.test_fraction, rng=np.random.default_rng(streams["split"])
    )
    train_targets, test_targets = dataset.targets[split.train], dataset.targets[split.test]
    shuffled_rows = np.random.default_rng(streams["shuffle_control"]).permutation(len(split.train))
    permuter = GroupPermuter(dataset.groups[split.train])
    baseline = score_predictions(np.broadcast_to(train_targets.mean(axis=0), test_targets.shape), test_targets)

    layers = []
    for layer, activations in dataset.activations.items():
        before_each_layer()
        train_activations, test_activations = activations[split.train], activations[split.test]
        design = AffineDesign(train_activations, ridge=options.ridge)
        probe = design.fit(train_targets)
        predictions = probe.predict(test_activations)
        test = score_predictions(predictions, test_targets)
        # Every layer meets the same permutations and bootstrap resamples: layer differences are paired.
        null_rng = np.random.default_rng(streams["permutation_null"])
        null_r2 = np.array(
            [
                score_predictions(
                    design.fit(train_targets[permuter.draw(null_rng)]).predict(test_activations), test_targets
                ).r2
                for _ in range(options.num_permutations)
            ]
        )
        sums = GroupSums.of(predictions - test_targets, test_targets, dataset.groups[split.test])
        intervals = cluster_bootstrap(
            sums,
            num_resamples=options.num_bootstrap,
            confidence=options.confidence,
            rng=np.random.default_rng(streams["bootstrap"]),
        )
        layers.append(
            LayerResult(
                layer=layer,
                probe=probe,
                test=test,
                train=score_predictions(probe.predict(train_activations), train_targets),
                baseline=baseline,
                shuffle_control=score_predictions(
                    design.fit(train_targets[shuffled_rows]).predict(test_activations), test_targets
                ),
                bootstrap={"confidence": options.confidence, "num_resamples": options.num_bootstrap, **intervals},
                permutation_null={
                    "num_permutations": options.num_permutations,
                    "permutable_fraction": float(permuter.permutable_fraction),
                    "r2_mean": float(null_r2.mean()),
                    "r2_max": float(null_r2.max()),
                    "p_value": float((1 + np.sum(null_r2 >= test.r2)) / (1 + len(null_r2))),
                },
            )
        )
    return ProbeReport(
        target_name=dataset.target_name,
        distribution=dataset.distribution,
        options=options,
        split={
            "num_train": len(split.train),
            "num_test": len(split.test),
            "num_train_groups": split.num_train_groups,
            "num_test_groups": split.num_test_groups,
        },
        seed={**describe(seed), "streams": list(_STREAMS)},
        provenance=dict(provenance or {}),
        layers=layers,
    )


def metric_table(reports: Sequence[ProbeReport], metric: str) -> dict[str, list[float]]:
    """`{layer: [metric of each report]}`; raw metrics only across one sampling distribution.

    Raises DistributionMismatchError (naming the fix) when `metric` is raw (e.g. `mse`) and the
    reports were probed on different distributions, and ValueError when they probe different
    targets or layers.
    """
    if not reports:
        raise ValueError("metric_table needs at least one report")
    targets = {report.target_name for report in reports}
    if len(targets) > 1:
        raise ValueError(f"the reports probe different targets {sorted(targets)}; tabulate one target at a time")
    require_comparable([report.distribution for report in reports], metric)
    layer_names = [result.layer for result in reports[0].layers]
    for report in reports[1:]:
        if [result.layer for result in report.layers] != layer_names:
            raise ValueError(
                f"the reports probe different layers ({layer_names} vs {[r.layer for r in report.layers]}); "
                "probe every checkpoint at the same layers"
            )
    return {name: [report.layer(name).metric(metric) for report in reports] for name in layer_names}
