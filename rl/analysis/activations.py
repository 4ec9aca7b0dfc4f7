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

A module with more than one encoder (rl.learners' TransformerModel with `vf_share_layers=False`:
the policy's `encoder` and the value head's `critic_encoder`) gives one stream per encoder. The
policy encoder's layers keep the plain names; another encoder's carry its attribute name, so
every probe report and table names the encoder it read:

    outputs[residual_stream_key("critic_encoder")]            # "residual_stream/critic_encoder"
    layer_names(3, encoder="critic_encoder")                   # ["critic_encoder/residual_0", ...]
    split_layer("critic_encoder/residual_1")                   # ("critic_encoder", "residual_1")
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

ACTION_DIST_INPUTS = "action_dist_inputs"
VALUES = "values"
RESIDUAL_STREAM = "residual_stream"
# The encoder the policy head reads (rl.learners.models.base.ACTOR_ENCODER; modules_test checks they agree).
POLICY_ENCODER = "encoder"
_SEPARATOR = "/"


def residual_stream_key(encoder: str = POLICY_ENCODER) -> str:
    """The output key of `encoder`'s residual stream: RESIDUAL_STREAM for the policy's, `residual_stream/<encoder>` else."""
    return RESIDUAL_STREAM if encoder == POLICY_ENCODER else f"{RESIDUAL_STREAM}{_SEPARATOR}{encoder}"


def residual_streams(outputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """{encoder: its residual stream} from a view's outputs (the policy encoder's first; {} without one)."""
    streams = {}
    for key, stream in outputs.items():
        if key == RESIDUAL_STREAM:
            streams = {POLICY_ENCODER: stream, **streams}
        elif key.startswith(RESIDUAL_STREAM + _SEPARATOR):
            streams[key[len(RESIDUAL_STREAM + _SEPARATOR) :]] = stream
    return streams


def layer_names(num_streams: int, encoder: str = POLICY_ENCODER) -> list[str]:
    prefix = "" if encoder == POLICY_ENCODER else f"{encoder}{_SEPARATOR}"
    return [f"{prefix}residual_{index}" for index in range(num_streams)]


def split_layer(layer: str) -> tuple[str, str]:
    """(encoder, layer within it) of a layer name: "residual_1" -> ("encoder", "residual_1")."""
    encoder, separator, name = layer.rpartition(_SEPARATOR)
    return (encoder if separator else POLICY_ENCODER), name


def layer_activations(stream: torch.Tensor, encoder: str = POLICY_ENCODER) -> dict[str, np.ndarray]:
    """(n_layers + 1, ..., d_model) of `encoder` -> {layer name: float32 array (..., d_model)}."""
    return {name: layer.detach().cpu().numpy() for name, layer in zip(layer_names(len(stream), encoder), stream)}
