"""Activations at the end of every token context: a probe dataset on the uniform-context distribution.

    from rl.analysis.modules import AnalysisView
    from rl.analysis.rollouts import context_dataset

    dataset = context_dataset(AnalysisView(module), Mess3Contexts(), max_length=10,
                              group_prefix_length=4, batch_size=2048)
    # or a portable module: context_dataset(load_portable_module(folder), ...)

Each context is fed from an episode start as the adapter's observations; the row is the
residual stream at its last step (of every encoder the view returns, its layers named by the
encoder: rl.analysis.activations) and the target is the adapter's target for the whole context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from rl.analysis.activations import layer_activations, residual_streams
from rl.analysis.adapters import ContextAdapter
from rl.analysis.probes import ProbeDataset, SamplingDistribution
from rl.analysis.progress import ProgressBar
from rl.analysis.token_contexts import context_groups, count_contexts, enumerate_contexts

View = Callable[[torch.Tensor], Mapping[str, torch.Tensor]]


def context_dataset(
    view: View,
    adapter: ContextAdapter,
    *,
    max_length: int,
    group_prefix_length: int,
    batch_size: int,
    min_length: int = 1,
    show_progress: bool = True,
) -> ProbeDataset:
    """Every context of min_length..max_length once; groups are context subtrees (see rl.analysis.token_contexts)."""
    total = count_contexts(num_tokens=adapter.num_tokens, max_length=max_length, min_length=min_length)
    layers: dict[str, list[np.ndarray]] = {}
    targets, groups = [], []
    with ProgressBar(total=total, label=f"contexts of {adapter.name}", enabled=show_progress) as bar:
        for contexts in enumerate_contexts(
            num_tokens=adapter.num_tokens, max_length=max_length, batch_size=batch_size, min_length=min_length
        ):
            obs = torch.as_tensor(np.asarray(adapter.observations(contexts), dtype=np.float32))
            with torch.no_grad():
                outputs = view(obs)
            streams = residual_streams(outputs)
            if not streams:
                raise ValueError(
                    "this module exposes no residual stream to probe (only TransformerModel does); "
                    "probe a TransformerModel checkpoint"
                )
            for encoder, stream in streams.items():  # every encoder's layers, named by it
                for name, activations in layer_activations(stream[:, :, -1], encoder).items():
                    layers.setdefault(name, []).append(activations)
            targets.append(np.asarray(adapter.targets(contexts), dtype=np.float64))
            groups.append(
                context_groups(contexts, num_tokens=adapter.num_tokens, group_prefix_length=group_prefix_length)
            )
            bar.advance(len(contexts))
    return ProbeDataset(
        activations={name: np.concatenate(parts) for name, parts in layers.items()},
        targets=np.concatenate(targets),
        groups=np.concatenate(groups),
        distribution=SamplingDistribution.uniform_contexts(
            process=adapter.name,
            num_tokens=adapter.num_tokens,
            max_length=max_length,
            min_length=min_length,
            group_prefix_length=group_prefix_length,
        ),
        target_name=adapter.target_name,
    )
