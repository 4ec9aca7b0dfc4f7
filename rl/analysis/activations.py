"""The outputs analysis reads from a module, and the names of its residual-stream layers.

Both views of a module return the same dict for observations (batch, time, obs_dim) that start
an episode: `rl.analysis.modules.AnalysisView` (an RLModule, with Ray) and
`rl.analysis.portable.PortableModule` (torch only).

    outputs = view(obs)
    outputs[ACTION_DIST_INPUTS]            # (B, T, ...) the policy head's output
    outputs[VALUES]                        # (B, T)
    outputs[RESIDUAL_STREAM]               # (n_layers + 1, B, T, d_model), if the module has one
    layer_activations(outputs[RESIDUAL_STREAM][:, :, -1])   # {"residual_0": (B, d), ...}

`residual_0` is the projected observation; `residual_k` the stream after block k.
"""

from __future__ import annotations

import numpy as np
import torch

ACTION_DIST_INPUTS = "action_dist_inputs"
VALUES = "values"
RESIDUAL_STREAM = "residual_stream"


def layer_names(num_streams: int) -> list[str]:
    return [f"residual_{index}" for index in range(num_streams)]


def layer_activations(stream: torch.Tensor) -> dict[str, np.ndarray]:
    """(n_layers + 1, ..., d_model) -> {layer name: float32 array (..., d_model)}."""
    return {name: layer.detach().cpu().numpy() for name, layer in zip(layer_names(len(stream)), stream)}
