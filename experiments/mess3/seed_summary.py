"""Seeds of several Mess3 agents side by side: normalised scores and probe R^2 with intervals over seeds.

    ./bazelw run //experiments/mess3:seed_summary -- \
        reward_only=<run-id>,<run-id>,<run-id> memoryless_agent=<run-id>,... next_token_aux=<run-id>,...

Each group is an agent (a recipe) and its runs (one per training seed), read from
results/<run-id>/ (control_scores.json; belief_geometry.json where the recipe probes). Per group:
the normalised value and episode return of the final policy (greedy and sampled actions) and the
final training return, as the mean over seeds with a Student-t 95 % interval (few seeds: wide),
and the episode return once more on the scale of the policies best for the return (gamma 1:
control_scores.return_optimal_scale);
per probed layer, the trained R^2 over seeds and the R^2 of every random network of those runs.
Writes seed_summary.json, seed_summary.md and seed_scores.png to --out (default
results/seed_summary-<first run id>/) and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Mapping, Sequence

from matplotlib.figure import Figure

from experiments.mess3 import belief_geometry, control_scores
from rl.analysis.plots import save_figure
from rl.analysis.scores import mean_interval_or_point
from rl.harness.commands import catalog
from rl.harness.run import records

HERE = pathlib.Path(__file__).resolve().parent
MEASURES = (("greedy", "normalised_value"), ("sampled", "normalised_value"),
            ("greedy", "normalised_episode_return"), ("sampled", "normalised_episode_return"))


def _over_seeds(values: Sequence[float]) -> dict:
    return {**mean_interval_or_point(values, spread="t"), "values": [float(value) for value in values]}


def summarise(groups: Mapping[str, Sequence[pathlib.Path]]) -> dict:
    """{group: {"runs", "scores": {measure: over seeds}, "probes": {distribution: {layer: trained, random}}}}."""
    summary = {}
    return_scale = control_scores.return_optimal_scale()
    for group, folders in groups.items():
        scores = [json.loads((folder / control_scores.SCORES_FILE).read_text()) for folder in folders]
        entry = {"runs": [folder.name for folder in folders], "scores": {}}
        for mode, measure in MEASURES:
            entry["scores"][f"{measure} ({mode})"] = _over_seeds([s["evaluation"][mode][measure]["mean"] for s in scores])
        entry["scores"]["value (greedy)"] = _over_seeds([s["evaluation"]["greedy"]["value"]["mean"] for s in scores])
        for mode in ("greedy", "sampled"):  # the same returns against the references that are best for the return
            entry["scores"][f"return on the gamma-1 scale ({mode})"] = _over_seeds(
                [return_scale.normalise(s["evaluation"][mode]["episode_return"]["mean"]) for s in scores])
        entry["scores"]["final training return"] = _over_seeds([s["training"]["final_return"]["mean"] for s in scores])
        geometry = [folder / belief_geometry.COMPARISON_FILE for folder in folders]
        if all(path.is_file() for path in geometry):
            entry["probes"] = _probes([json.loads(path.read_text()) for path in geometry])
        summary[group] = entry
    return summary


def _probes(comparisons: list[dict]) -> dict:
    probes = {}
    for distribution, first in comparisons[0]["distributions"].items():
        probes[distribution] = {
            layer: {"trained": _over_seeds([c["distributions"][distribution]["layers"][layer]["trained_r2"]
                                            for c in comparisons]),
                    "random": _over_seeds([r2 for c in comparisons
                                           for r2 in c["distributions"][distribution]["layers"][layer]["random_r2"]])}
            for layer in first["layers"]}
    return probes


def markdown(summary: dict) -> str:
    def cell(figure):
        if figure["n"] == 1:
            return f"{figure['mean']:.3f}"
        return f"{figure['mean']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"

    measures = list(next(iter(summary.values()))["scores"])
    lines = ["| agent | seeds | " + " | ".join(measures) + " |", "|---|---|" + "---|" * len(measures)]
    for group, entry in summary.items():
        lines.append(f"| {group} | {len(entry['runs'])} | " + " | ".join(cell(entry["scores"][m]) for m in measures) + " |")
    for group, entry in summary.items():
        for distribution, layers in entry.get("probes", {}).items():
            lines += ["", f"{group}, {distribution}: probe R^2 per layer, trained (over seeds) vs random networks",
                      "", "| layer | trained | random |", "|---|---|---|"]
            lines += [f"| {layer} | {cell(row['trained'])} | {cell(row['random'])} |" for layer, row in layers.items()]
    return "\n".join(lines)


def scores_figure(summary: dict) -> Figure:
    """Per agent, each seed's normalised value (dots) and the mean with its t interval; 0 and 1 marked."""
    figure = Figure(figsize=(7, 3.6), dpi=120)
    for index, mode in enumerate(("greedy", "sampled")):
        axes = figure.add_subplot(1, 2, index + 1)
        for position, (group, entry) in enumerate(summary.items()):
            figure_ = entry["scores"][f"normalised_value ({mode})"]
            axes.scatter([position] * len(figure_["values"]), figure_["values"], color="tab:grey", s=12, zorder=3)
            if figure_["n"] > 1:
                axes.errorbar([position], [figure_["mean"]], yerr=[[figure_["mean"] - figure_["low"]],
                                                                   [figure_["high"] - figure_["mean"]]],
                              fmt="o", color="tab:blue", capsize=4)
        axes.axhline(0.0, color="tab:red", linestyle="--", linewidth=1, label="best memoryless (0)")
        axes.axhline(1.0, color="tab:green", linestyle="--", linewidth=1, label="belief-optimal (1)")
        axes.set_xticks(range(len(summary)), list(summary), fontsize=7, rotation=15)
        axes.set_title(f"gamma-0.9 value, {mode} actions", fontsize=9)
        axes.set_ylabel("normalised value", fontsize=8)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=6)
    figure.tight_layout()
    return figure


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="+", help="agent=<run-id>,<run-id>,... (one per training seed)")
    parser.add_argument("--results-dir", default=str(HERE / "results"), help="where results/<run-id>/ folders are")
    parser.add_argument("--out", default=None, help="folder for the summary (default: results/seed_summary-<first run>)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    groups = {}
    for text in args.groups:
        name, _, ids = text.partition("=")
        if not name or not ids:
            raise SystemExit(f"seed_summary: {text!r} is not agent=<run-id>,<run-id>,...")
        groups[name] = [pathlib.Path(catalog.find_run(run_id, [args.results_dir]).run_dir) for run_id in ids.split(",")]
    summary = summarise(groups)
    out = pathlib.Path(args.out or pathlib.Path(args.results_dir) / f"seed_summary-{next(iter(groups.values()))[0].name}")
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(summary)
    records.write_json_atomically(str(out / "seed_summary.json"), summary)
    records.write_text_atomically(str(out / "seed_summary.md"), text + "\n")
    save_figure(scores_figure(summary), str(out / "seed_scores.png"))
    print(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
