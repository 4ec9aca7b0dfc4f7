"""rl.harness: run RL experiments and keep their records (what ran, with what, and what came out).

    from rl.harness import RunContext, StopRule, LogSpaced, run_direct

    def run(context: RunContext):                     # a recipe: the science is the recipe's
        config = PPOConfig().environment("CartPole-v1")
        return run_direct(context, config, stop=StopRule(training_iterations=2 if context.smoke else 200),
                          checkpoint_at=LogSpaced(2.0), checkpoint_initial=True)

    from rl.harness import find_run, HarnessError      # reading records
    run = find_run("20261201T011500Z-3f9a2c", ["."])
    run.manifest.status, run.manifest.checkpoints[-1].path

The rooms (docs/architecture.md): `run/` (the run's records: context, session, manifest, layout,
seeds, provenance), `training/` (the one lifecycle and its runners; the only room that imports
Ray), `commands/` (the CLI and what it runs: recipes, resume, catalog, reproduce) and `remote/`
(B2). Exports load lazily: `import rl.harness` imports neither Ray nor torch. A room's module is
imported by its path (`from rl.harness.run import records`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # errors
    "HarnessError": "rl.harness.errors",
    "UsageError": "rl.harness.errors",
    # run/: a run's context and records
    "ResumeSource": "rl.harness.run.manifest",
    "RunContext": "rl.harness.run.context",
    "RunLayout": "rl.harness.run.layout",
    "RunSession": "rl.harness.run.session",
    "SeedStreams": "rl.harness.run.seeding",
    "CheckpointEntry": "rl.harness.run.manifest",
    "OutputEntry": "rl.harness.run.manifest",
    "RunManifest": "rl.harness.run.manifest",
    "read_manifest": "rl.harness.run.manifest",
    "RecordError": "rl.harness.run.records",
    "Hyperparameters": "rl.harness.run.hyperparameters",
    "Range": "rl.harness.run.hyperparameters",
    # run/: finding recorded runs
    "DamagedRun": "rl.harness.run.finder",
    "Run": "rl.harness.run.finder",
    "RunNotFound": "rl.harness.run.finder",
    "find_run": "rl.harness.run.finder",
    "find_runs": "rl.harness.run.finder",
    "scan_runs": "rl.harness.run.finder",
    "HardwareProfile": "rl.harness.run.machine",
    # training/: the lifecycle and its runners
    "Every": "rl.harness.training.runners",
    "LogSpaced": "rl.harness.training.runners",
    "StopRule": "rl.harness.training.runners",
    "run_direct": "rl.harness.training.runners",
    "run_tune": "rl.harness.training.runners",
    "TrainedAgent": "rl.harness.training.agents",
    "train_in_turn": "rl.harness.training.agents",
    "Trainer": "rl.harness.training.in_process",
    # study/: agents x seeds
    "Score": "rl.harness.study.declaration",
    "Study": "rl.harness.study.declaration",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl.harness' has no attribute {name!r}; its public names are rl.harness.__all__")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
