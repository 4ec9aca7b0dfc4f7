"""Does stepping 32 envs together change what the main job learns? Returns at equal env steps, 1 env vs 32.

    ./bazelw run //experiments/mess3:parallel_envs_check            # 3 seeds x {1, 32} envs, 30 updates each
    ./bazelw run //experiments/mess3:parallel_envs_check -- --smoke

The main job's PPO (controlled_mess3.ppo_config, train batch 2048) trained with the old sampling
(one env: a batch is one env's 2048 consecutive steps) and the new (PARALLEL_ENVS envs x 64
steps), on the same three seeds. Writes parallel_envs_check.json (return after each update per
run, and per group the mean/min/max at each env-step count) and, into its artifacts folder,
learning_curves.png.
"""

from __future__ import annotations

import statistics

from experiments.mess3.task import controlled_mess3 as task
from rl.analysis.plots import save_figure
from rl.harness.run import manifest, metric_keys, records
from rl.harness.training import configs, lifecycle, runners

SEEDS = 3
BUDGET = {True: runners.StopRule(training_iterations=2), False: runners.StopRule(training_iterations=30)}
GROUPS = (1, task.PARALLEL_ENVS)
RESULT_FILE = "parallel_envs_check.json"


def _train(context, parallel_envs: int, seed: int, trial: str) -> list[list[float]]:
    config = configs.prepare_config(
        task.ppo_config(smoke=context.smoke), seed=seed, profile=context.hardware, parallel_envs=parallel_envs
    )
    algo = config.build_algo()
    curve = []
    try:
        for row in lifecycle.train_rows(
            context, algo, BUDGET[context.smoke], trial=trial, tags={"parallel_envs": parallel_envs}
        ):
            episode_return = row.get(metric_keys.RETURN)
            if episode_return is not None and episode_return == episode_return:  # no episode ended yet: None/NaN
                curve.append([row[metric_keys.ENV_STEPS], episode_return])
    finally:
        algo.stop()
    return curve


def spread_by_env_steps(curves: list[list[list[float]]]) -> list[dict]:
    """Per env-step count in every curve: mean, min and max return over the curves."""
    steps = sorted(set.intersection(*({step for step, _ in curve} for curve in curves)))
    table = []
    for step in steps:
        values = [value for curve in curves for at, value in curve if at == step]
        table.append({"env_steps": step, "mean": statistics.fmean(values), "min": min(values), "max": max(values)})
    return table


def _figure(groups: dict[str, list[list[list[float]]]]):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    for (label, curves), color in zip(groups.items(), ("tab:blue", "tab:orange")):
        for curve in curves:
            axes.plot(*zip(*curve), color=color, linewidth=0.8, alpha=0.4)
        table = spread_by_env_steps(curves)
        axes.plot(
            [r["env_steps"] for r in table],
            [r["mean"] for r in table],
            color=color,
            linewidth=2.2,
            label=f"{label} (mean of {len(curves)} seeds)",
        )
    axes.set_xlabel("env steps")
    axes.set_ylabel("episode return (mean over recent episodes)")
    axes.set_title("controlled Mess3, PPO + TransformerModel: 1 env vs parallel envs, same seeds")
    axes.legend()
    figure.tight_layout()
    return figure


def run(context):
    if context.resume is not None:
        raise ValueError("parallel_envs_check trains six short runs and does not resume; start a new run")
    seeds = context.seeds.integers("parallel_envs_check", SEEDS)
    context.recorder.record_runner(
        manifest.OwnLoopRunnerRecord(
            kind="sequential runs", details={"groups": list(GROUPS), "seeds": seeds, "stop": str(BUDGET[context.smoke])}
        )
    )
    groups: dict[str, list] = {}
    with lifecycle.ray_cluster(context):
        for parallel_envs in GROUPS:
            label = f"{parallel_envs} env{'s' if parallel_envs > 1 else ''}"
            groups[label] = [_train(context, parallel_envs, seed, f"envs{parallel_envs}-seed{seed}") for seed in seeds]
    record = {
        "seeds": seeds,
        "groups": {
            label: {"curves": curves, "spread": spread_by_env_steps(curves)} for label, curves in groups.items()
        },
    }
    records.write_json_atomically(str(context.results_dir / RESULT_FILE), record)
    save_figure(_figure(groups), str(context.artifacts_dir / "learning_curves.png"))
    final = {label: value["spread"][-1] for label, value in record["groups"].items() if value["spread"]}
    print(f"results: {context.results_dir}")
    return {"final": final}
