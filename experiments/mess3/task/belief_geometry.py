"""The analysis stage of the Mess3 experiments: affine belief probes of every checkpoint and of
randomly initialised networks of the same architecture, written into results/<run-id>/.

    from experiments.mess3.task import belief_geometry

    comparison = belief_geometry.analyse(context, plan, random_networks=[build(seed) for seed in seeds],
                                         rows=context.metrics())

Everything is rl.analysis: `probe_checkpoints` and `probe_outputs` (probe_report.json,
probe_r2_<distribution>.png, belief_simplex_<distribution>.png, learning_curves.png), run on the
checkpoints the run recorded (`checkpoints.from_context`), and `rl.analysis.baselines.probe_random_networks` for the random
networks (the same loop with the same probe seed: the same contexts, episode seeds, splits and
resamples as the checkpoints, so comparisons are paired). Every file goes through `context.write_output`, so the
manifest lists it. Added here: random_network_probes.json, belief_simplex_<distribution>_random.png,
and belief_geometry.json + probe_r2_trained_vs_random.png, the per-layer comparison. A module with
a critic encoder of its own has its layers probed too (`critic_encoder/residual_k`, rl.analysis.activations).
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from rl.analysis import (
    POLICY_ENCODER,
    ProbePlan,
    best_layer_simplex,
    probe_checkpoints,
    probe_outputs,
    probe_random_networks,
    probe_seed,
    split_layer,
)
from rl.analysis.checkpoints import from_context
from rl.analysis.plots import figure_png
from rl.learners.models import CRITIC_ENCODER

COMPARISON_FILE = "belief_geometry.json"
RANDOM_REPORT_FILE = "random_network_probes.json"
RANDOM_FOLDER = "random_networks"


def analyse(
    context, plan: ProbePlan, *, random_networks: Sequence, rows: list[dict], show_progress: bool = True
) -> dict:
    """Probes the run's checkpoints and `random_networks` (RLModules); returns the per-layer comparison.

    `rows` are the run's metrics rows (context.metrics()), for the learning-curve figure; every file
    is written with context.write_output, so the manifest lists it.
    """
    seed = probe_seed(context.seeds)
    found = from_context(context)
    trained = probe_checkpoints(found, plan, seed=seed, module_id="default_policy", show_progress=show_progress)
    outputs = probe_outputs(found, trained, seed, rows=rows, from_source=False)

    random = probe_random_networks(
        found,
        plan,
        random_networks,
        folder=pathlib.Path(context.artifacts_dir) / RANDOM_FOLDER,
        seed=seed,
        show_progress=show_progress,
    )
    outputs[RANDOM_REPORT_FILE] = {
        "probe_seed": int(seed.entropy),
        "networks": [
            {"name": r.checkpoint.name, "reports": {k: v.as_dict() for k, v in r.reports.items()}} for r in random
        ],
    }
    for kind in random[0].reports:
        simplex = best_layer_simplex(random[0], kind, label="random init")
        if simplex is not None:
            outputs[f"belief_simplex_{kind}_random.png"] = figure_png(simplex)

    comparison = compare(trained, random)
    comparison["probe_seed"] = int(seed.entropy)
    outputs[COMPARISON_FILE] = comparison
    outputs["probe_r2_trained_vs_random.png"] = figure_png(comparison_figure(comparison))
    for name, data in outputs.items():
        print(f"wrote {context.write_output(name, data)}")
    return comparison


def compare(trained: list, random: list) -> dict:
    """Per distribution and layer: held-out R^2 of the last checkpoint (with its bootstrap interval),
    of the step-0 checkpoint (the same network before training) and of each random network."""
    first, last = trained[0], trained[-1]
    table = {}
    for kind, report in last.reports.items():
        layers = {}
        for index, layer in enumerate(report.layers):
            layers[layer.layer] = {
                "trained_r2": layer.test.r2,
                "trained_r2_interval": list(layer.bootstrap["r2"]),
                "trained_null_r2_max": layer.permutation_null["r2_max"],
                "trained_p_value": layer.permutation_null["p_value"],
                "step0_r2": first.reports[kind].layers[index].test.r2,
                "random_r2": [r.reports[kind].layers[index].test.r2 for r in random],
            }
        table[kind] = {
            "distribution": report.distribution.as_dict(),
            "last_checkpoint": last.checkpoint.name,
            "first_checkpoint": first.checkpoint.name,
            "layers": layers,
        }
    return {"distributions": table}


def comparison_figure(comparison: dict) -> Figure:
    """Held-out R^2 per layer: trained (with its bootstrap interval), step 0, and each random network."""
    kinds = list(comparison["distributions"])
    figure = Figure(figsize=(5 * len(kinds), 3.6), layout="constrained")
    for axes, kind in zip(figure.subplots(1, len(kinds), squeeze=False)[0], kinds):
        layers = comparison["distributions"][kind]["layers"]
        names = list(layers)
        x = np.arange(len(names))
        trained = np.array([layers[n]["trained_r2"] for n in names])
        low, high = np.array([layers[n]["trained_r2_interval"] for n in names]).T
        axes.bar(x - 0.25, trained, 0.25, yerr=[trained - low, high - trained], label="trained (last)")
        axes.bar(x, [layers[n]["step0_r2"] for n in names], 0.25, label="step 0 (same init)")
        random = [layers[n]["random_r2"] for n in names]
        axes.bar(x + 0.25, [np.mean(r) for r in random], 0.25, label="random init (mean)")
        for i, values in enumerate(random):
            axes.plot([x[i] + 0.25] * len(values), values, "k.", markersize=4)
        axes.set_xticks(x, names, rotation=30 if len(names) > 3 else 0)  # several encoders' layers: long names
        axes.set_ylim(min(0.0, float(np.min(trained))) - 0.05, 1.0)
        axes.set_ylabel("held-out R^2 of the belief")
        axes.set_title(kind)
        axes.legend(fontsize="small", loc="lower right")
    return figure


def headline(comparison: dict) -> dict:
    """The compact form for summary.json, per distribution: {layer: {"trained", "step0", "random_mean"}}
    for the policy encoder's layers, and the same by the encoder each role reads:
    `policy_encoder` and `critic_encoder` (the value head's own encoder where the module has one,
    else the shared encoder: both roles then read the same layers)."""
    table = {}
    for kind, entry in comparison["distributions"].items():
        encoders: dict[str, dict] = {}
        for name, row in entry["layers"].items():
            encoder, layer = split_layer(name)
            encoders.setdefault(encoder, {})[layer] = {
                "trained": round(row["trained_r2"], 4),
                "step0": round(row["step0_r2"], 4),
                "random_mean": round(float(np.mean(row["random_r2"])), 4),
            }
        policy = encoders[POLICY_ENCODER]
        table[kind] = {**policy, "policy_encoder": policy, "critic_encoder": encoders.get(CRITIC_ENCODER, policy)}
    return table
