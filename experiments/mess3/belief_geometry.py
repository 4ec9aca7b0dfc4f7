"""The analysis stage of the Mess3 experiments: affine belief probes of every checkpoint and of
randomly initialised networks of the same architecture, written into results/<run-id>/.

    from experiments.mess3 import belief_geometry

    comparison = belief_geometry.analyse(context, plan, random_networks=[build(seed) for seed in seeds])

Everything is rl.analysis: `probe_command.probe_checkpoints` and `write_outputs` (probe_report.json,
probe_r2_<distribution>.png, belief_simplex_<distribution>.png, learning_curves.png), run on the
checkpoints the harness recorded, and `rl.analysis.baselines.probe_random_networks` for the random
networks (the same loop with the same probe seed: the same contexts, episode seeds, splits and
resamples as the checkpoints, so comparisons are paired). Added here: random_network_probes.json, belief_simplex_<distribution>_random.png,
and belief_geometry.json + probe_r2_trained_vs_random.png, the per-layer comparison.
"""

from __future__ import annotations

import pathlib
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from rl.analysis import probe_command
from rl.analysis.adapters import ProbePlan
from rl.analysis.baselines import probe_random_networks
from rl.analysis.checkpoints import find_checkpoints
from rl.analysis.plots import belief_simplex_figure, save_figure
from rl.harness.run import records

COMPARISON_FILE = "belief_geometry.json"
RANDOM_REPORT_FILE = "random_network_probes.json"
RANDOM_FOLDER = "random_networks"


def analyse(context, plan: ProbePlan, *, random_networks: Sequence, show_progress: bool = True) -> dict:
    """Probes the run's checkpoints and `random_networks` (RLModules); returns the per-layer comparison."""
    probe_seed = probe_command.probe_seed(context.seeds)
    found = find_checkpoints(context.run_id, roots=[str(context.results_dir.parent)])
    trained = probe_command.probe_checkpoints(found, plan, seed=probe_seed, module_id="default_policy",
                                              show_progress=show_progress)
    written = probe_command.write_outputs(found, trained, probe_seed, from_source=False)

    random = probe_random_networks(found, plan, random_networks, folder=pathlib.Path(context.artifacts_dir) / RANDOM_FOLDER,
                                   seed=probe_seed, show_progress=show_progress)
    folder = pathlib.Path(context.results_dir)
    records.write_json_atomically(str(folder / RANDOM_REPORT_FILE), {
        "probe_seed": int(probe_seed.entropy),
        "networks": [{"name": r.checkpoint.name, "reports": {k: v.as_dict() for k, v in r.reports.items()}}
                     for r in random],
    })
    written.append(str(folder / RANDOM_REPORT_FILE))
    for kind, report in random[0].reports.items():
        best = max(report.layers, key=lambda layer: layer.test.r2)
        dataset = random[0].datasets[kind]
        if dataset.targets.shape[1] == 3:
            path = str(folder / f"belief_simplex_{kind}_random.png")
            title = f"random init, {best.layer} (held-out R^2 {best.test.r2:.3f}), {kind}"
            save_figure(belief_simplex_figure(dataset.targets, predicted=best.probe.predict(
                dataset.activations[best.layer]), title=title), path)
            written.append(path)

    comparison = compare(trained, random)
    comparison["probe_seed"] = int(probe_seed.entropy)
    records.write_json_atomically(str(folder / COMPARISON_FILE), comparison)
    written.append(str(folder / COMPARISON_FILE))
    path = str(folder / "probe_r2_trained_vs_random.png")
    save_figure(comparison_figure(comparison), path)
    written.append(path)
    for path in written:
        print(f"wrote {path}")
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
        axes.set_xticks(x, names)
        axes.set_ylim(min(0.0, float(np.min(trained))) - 0.05, 1.0)
        axes.set_ylabel("held-out R^2 of the belief")
        axes.set_title(kind)
        axes.legend(fontsize="small", loc="lower right")
    return figure


def headline(comparison: dict) -> dict:
    """{distribution: {layer: {"trained": r2, "random_mean": r2}}}: the compact form for summary.json."""
    return {
        kind: {name: {"trained": round(row["trained_r2"], 4), "step0": round(row["step0_r2"], 4),
                      "random_mean": round(float(np.mean(row["random_r2"])), 4)}
               for name, row in entry["layers"].items()}
        for kind, entry in comparison["distributions"].items()
    }
