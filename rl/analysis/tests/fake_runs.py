"""Harness run records holding given RLModules as checkpoints, without training (fast tests).

run_id = fake_run(tmp_path / "exp", [module_a, module_b], experiment="rl.analysis.tests.probe_recipe")
# tmp_path/exp/results/<run-id>/run_manifest.json, tmp_path/exp/artifacts/<run-id>/checkpoints/iter_00000N
"""

import pathlib

from rl.harness import RunLayout, RunManifest, RunSession, SeedStreams
from rl.harness.run.manifest import ExperimentRecord

RUN_ID = "20261201T000000Z-abcdef"


ROOT_SEED = 0


def save_in_checkpoint(module, checkpoint: pathlib.Path) -> None:
    """Saves `module` where an RLlib Algorithm checkpoint keeps its default module."""
    module.save_to_path(str(checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy"))


def fake_run(folder: pathlib.Path, modules, *, experiment: str, probe_stream: bool = False, smoke: bool = False) -> str:
    """Checkpoint N (iteration N, 100 N env steps) keeps modules[N-1] where an Algorithm keeps its module.

    `probe_stream`: the run drew its `probe` seed stream (as recipes that probe in-run do);
    `smoke`: a smoke run (records under smoke/).
    """
    seeds = SeedStreams(ROOT_SEED)
    layout = RunLayout(folder / "results", folder / "artifacts", RUN_ID, smoke)
    manifest = RunManifest(
        run_id=RUN_ID,
        status=None,
        experiment=ExperimentRecord(experiment),
        seed=ROOT_SEED,
        options={"smoke": smoke},
        paths={},
    )
    run = RunSession(layout=layout, manifest=manifest, seeds=seeds)
    if probe_stream:
        seeds.integer("probe")
    run.start()
    for iteration, module in enumerate(modules, start=1):
        run.log_metrics(
            {
                "training_iteration": iteration,
                "num_env_steps_sampled_lifetime": 100 * iteration,
                "env_runners": {"episode_return_mean": float(iteration)},
            }
        )
        with run.checkpoint(iteration=iteration, env_steps=100 * iteration) as checkpoint:
            save_in_checkpoint(module, checkpoint)
    run.finish("completed")
    return RUN_ID
