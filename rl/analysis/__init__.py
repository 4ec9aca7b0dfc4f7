"""rl.analysis: what trained modules and recorded runs hold (belief probes, rollouts, figures, scores).

    from rl.analysis import (AnalysisView, ProbeOptions, ProbePlan, find_checkpoints, load_rl_module,
                             probe_checkpoints, probe_outputs, probe_seed)

    found = from_context(context)                      # or find_checkpoints(run_id, roots=["experiments/mess3"])
    seed = probe_seed(context.seeds)
    results = probe_checkpoints(found, plan, seed=seed, module_id="default_policy")
    for name, data in probe_outputs(found, results, seed, rows=context.metrics(), from_source=False).items():
        context.write_output(name, data)

The sub-packages have faces of their own (`rl.analysis.probes`, `rollouts`, `checkpoints`,
`plots`); this one gathers what a recipe or notebook uses most. Exports load when first used (the
measured reason is beside `_EXPORTS`; type checkers and editors follow the `TYPE_CHECKING` imports):
`import rl.analysis` imports neither torch nor Ray.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Every export loads torch, RLlib, matplotlib or pandas: 15.4 s for all of them (`python -c "from rl.analysis
# import *"`, 2026-12-06, 2 cores under load 14), against 0.04 s for the face itself. Python runs this
# file before any `rl.analysis.<module>`, so an eager face would charge that to `rl-harness probe`'s
# argument parsing and to every import of one module; the names load when first used.
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
    "POLICY_ENCODER": "rl.analysis.activations",
    "RESIDUAL_STREAM": "rl.analysis.activations",
    "split_layer": "rl.analysis.activations",
    "enumerate_contexts": "rl.analysis.token_contexts",
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
    "best_layer_simplex": "rl.analysis.probing",
    "PROBE_COMMAND": "rl.analysis.probing",
    "probe_random_networks": "rl.analysis.baselines",
    "random_network": "rl.analysis.baselines",
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
    "mean_interval": "rl.analysis.scores",
    "mean_interval_or_point": "rl.analysis.scores",
    "child_stream": "rl.analysis.seeds",
    "ProgressBar": "rl.analysis.progress",
}

if TYPE_CHECKING:  # what editors, type checkers and call walkers follow; never run
    from rl.analysis.activations import ACTION_DIST_INPUTS, POLICY_ENCODER, RESIDUAL_STREAM, VALUES, split_layer
    from rl.analysis.adapters import ContextAdapter, ContextProbing, EnvAdapter, ProbePlan, RolloutProbing
    from rl.analysis.baselines import probe_random_networks, random_network
    from rl.analysis.checkpoints import find_checkpoints, from_context, load_rl_module
    from rl.analysis.modules import AnalysisView
    from rl.analysis.plots import belief_simplex_figure, learning_curves_figure, probe_r2_figure, save_figure
    from rl.analysis.portable import export_portable_module, load_portable_module
    from rl.analysis.probes import (
        PROCESS_ROLLOUTS,
        UNIFORM_CONTEXTS,
        ProbeDataset,
        ProbeOptions,
        ProbeReport,
        SamplingDistribution,
        probe_layers,
    )
    from rl.analysis.probing import (
        PROBE_COMMAND,
        CheckpointProbes,
        best_layer_simplex,
        probe_checkpoints,
        probe_outputs,
        probe_seed,
    )
    from rl.analysis.progress import ProgressBar
    from rl.analysis.rollouts import collect_rollouts, context_dataset
    from rl.analysis.scores import (
        ScoreScale,
        discounted_returns,
        mean_interval,
        mean_interval_or_point,
        normalised_interval,
    )
    from rl.analysis.seeds import child_stream
    from rl.analysis.token_contexts import enumerate_contexts

__all__ = [  # the names of _EXPORTS, literal so that tools read them
    "ACTION_DIST_INPUTS",
    "POLICY_ENCODER",
    "PROBE_COMMAND",
    "PROCESS_ROLLOUTS",
    "RESIDUAL_STREAM",
    "UNIFORM_CONTEXTS",
    "VALUES",
    "AnalysisView",
    "CheckpointProbes",
    "ContextAdapter",
    "ContextProbing",
    "EnvAdapter",
    "ProbeDataset",
    "ProbeOptions",
    "ProbePlan",
    "ProbeReport",
    "ProgressBar",
    "RolloutProbing",
    "SamplingDistribution",
    "ScoreScale",
    "belief_simplex_figure",
    "best_layer_simplex",
    "child_stream",
    "collect_rollouts",
    "context_dataset",
    "discounted_returns",
    "enumerate_contexts",
    "export_portable_module",
    "find_checkpoints",
    "from_context",
    "learning_curves_figure",
    "load_portable_module",
    "load_rl_module",
    "mean_interval",
    "mean_interval_or_point",
    "normalised_interval",
    "probe_checkpoints",
    "probe_layers",
    "probe_outputs",
    "probe_r2_figure",
    "probe_random_networks",
    "probe_seed",
    "random_network",
    "save_figure",
    "split_layer",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl.analysis' has no attribute {name!r}; its public names are rl.analysis.__all__")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
