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
(B2). The face imports its records' names eagerly; what needs numpy, Ray, torch or scipy loads
when first used (the reasons beside `_LAZY`), so `import rl.harness` stays light. A room's modules
are imported by their path (`from rl.harness.run import records`), as the room's `__all__` lists them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rl.harness import env_vars, errors
from rl.harness.errors import HarnessError, UsageError
from rl.harness.run.finder import DamagedRun, Run, RunNotFound, find_run, find_runs, scan_runs
from rl.harness.run.hyperparameters import Hyperparameters, Range
from rl.harness.run.layout import RunLayout
from rl.harness.run.machine import HardwareProfile
from rl.harness.run.manifest import CheckpointEntry, OutputEntry, ResumeSource, RunManifest, read_manifest
from rl.harness.run.records import RecordError

# Loaded when first used. Measured with `python -c "import <module>"` on the 2-core development
# machine (2026-12-06, under load): the records above take 0.1-0.5 s and import none of these.
_LAZY = {
    # numpy (the seed streams draw numpy Generators): the operator's tools run in the devops venv,
    # which has no numpy, and import this face (`from rl.harness import env_vars`).
    "RunContext": "rl.harness.run.context",
    "RunSession": "rl.harness.run.session",
    "SeedStreams": "rl.harness.run.seeding",
    # Ray, torch, gymnasium and pandas: 10-11 s; `rl-harness runs` and the catalog never need them.
    "Every": "rl.harness.training.runners",
    "LogSpaced": "rl.harness.training.runners",
    "StopRule": "rl.harness.training.runners",
    "run_direct": "rl.harness.training.runners",
    "run_tune": "rl.harness.training.runners",
    "TrainedAgent": "rl.harness.training.agents",
    "train_in_turn": "rl.harness.training.agents",
    "Trainer": "rl.harness.training.in_process",
    # scipy (a study's intervals): 3.4 s.
    "Score": "rl.harness.study.declaration",
    "Study": "rl.harness.study.declaration",
}

if TYPE_CHECKING:  # what editors, type checkers and call walkers follow; never run
    from rl.harness.run.context import RunContext
    from rl.harness.run.seeding import SeedStreams
    from rl.harness.run.session import RunSession
    from rl.harness.study.declaration import Score, Study
    from rl.harness.training.agents import TrainedAgent, train_in_turn
    from rl.harness.training.in_process import Trainer
    from rl.harness.training.runners import Every, LogSpaced, StopRule, run_direct, run_tune

__all__ = [
    # a run's context and records
    "CheckpointEntry",
    # finding recorded runs
    "DamagedRun",
    # training: the runners a recipe calls
    "Every",
    "HardwareProfile",
    # errors, and the environment variables the harness reads
    "HarnessError",
    "Hyperparameters",
    "LogSpaced",
    "OutputEntry",
    "Range",
    "RecordError",
    "ResumeSource",
    "Run",
    "RunContext",
    "RunLayout",
    "RunManifest",
    "RunNotFound",
    "RunSession",
    # studies: agents x seeds
    "Score",
    "SeedStreams",
    "StopRule",
    "Study",
    "TrainedAgent",
    "Trainer",
    "UsageError",
    "env_vars",
    "errors",
    "find_run",
    "find_runs",
    "read_manifest",
    "run_direct",
    "run_tune",
    "scan_runs",
    "train_in_turn",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rl.harness' has no attribute {name!r}; its public names are rl.harness.__all__")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
