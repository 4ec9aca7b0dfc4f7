"""rl.analysis: what trained modules and recorded runs hold (belief probes, rollouts, figures, scores).

    from rl.analysis import (AnalysisView, ProbeOptions, ProbePlan, find_checkpoints, load_rl_module,
                             probe_checkpoints, probe_outputs, probe_seed)

    found = from_context(context)                      # or find_checkpoints(run_id, roots=["experiments/mess3"])
    seed = probe_seed(context.seeds)
    results = probe_checkpoints(found, plan, seed=seed, module_id="default_policy")
    for name, data in probe_outputs(found, results, seed, rows=context.metrics(), from_source=False).items():
        context.write_output(name, data)

The sub-packages have faces of their own (`rl.analysis.probes`, `rollouts`, `checkpoints`,
`plots`); this one gathers what a recipe or notebook uses most. Exports load lazily:
`import rl.analysis` imports neither torch nor Ray.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # the adapters an experiment implements, and its probe plan
    "ContextAdapter": "rl.analysis.adapters",
    "ContextProbing": "rl.analysis.adapters",
    "EnvAdapter": "rl.analysis.adapters",
    "ProbePlan": "rl.analysis.adapters",
    "RolloutProbing": "rl.analysis.adapters",
    # one view of any actor-critic RLModule, and its output names
    "AnalysisView": "rl.analysis.modules",
    "ACTION_DIST_INPUTS": "rl.analysis.activations",
    "RESIDUAL_STREAM": "rl.analysis.activations",
    "VALUES": "rl.analysis.activations",
    # checkpoints of recorded runs
    "find_checkpoints": "rl.analysis.checkpoints",
    "from_context": "rl.analysis.checkpoints",
    "load_rl_module": "rl.analysis.checkpoints",
    "export_portable_module": "rl.analysis.portable",
    "load_portable_module": "rl.analysis.portable",
    # probing: the loop over checkpoints, its report and figures
    "CheckpointProbes": "rl.analysis.probing",
    "probe_checkpoints": "rl.analysis.probing",
    "probe_outputs": "rl.analysis.probing",
    "probe_seed": "rl.analysis.probing",
    "PROCESS_ROLLOUTS": "rl.analysis.probes",
    "UNIFORM_CONTEXTS": "rl.analysis.probes",
    "ProbeDataset": "rl.analysis.probes",
    "ProbeOptions": "rl.analysis.probes",
    "ProbeReport": "rl.analysis.probes",
    "SamplingDistribution": "rl.analysis.probes",
    "probe_layers": "rl.analysis.probes",
    # collecting activations
    "collect_rollouts": "rl.analysis.rollouts",
    "context_dataset": "rl.analysis.rollouts",
    # figures
    "belief_simplex_figure": "rl.analysis.plots",
    "learning_curves_figure": "rl.analysis.plots",
    "probe_r2_figure": "rl.analysis.plots",
    "save_figure": "rl.analysis.plots",
    # scores and seeds
    "ScoreScale": "rl.analysis.scores",
    "discounted_returns": "rl.analysis.scores",
    "normalised_interval": "rl.analysis.scores",
    "child_stream": "rl.analysis.seeds",
    "ProgressBar": "rl.analysis.progress",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl.analysis' has no attribute {name!r}; its public names are rl.analysis.__all__")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
