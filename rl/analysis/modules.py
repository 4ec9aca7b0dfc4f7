"""A uniform view of an actor-critic RLModule for analysis (rl.learners' MLPModel, TransformerModel).

    from rl.analysis.modules import AnalysisView

    view = AnalysisView(module)           # e.g. rl.analysis.checkpoints.load_rl_module(path)
    outputs = view(obs)                   # obs (B, T, obs_dim) from episode starts
    outputs["residual_stream"]            # (n_layers + 1, B, T, d_model): TransformerModel only
    outputs["residual_stream/critic_encoder"]   # the same for a separate critic encoder, if any

It is an `nn.Module`, so `torch.export` can turn it into a portable program
(rl.analysis.portable.export_portable_module) that returns the same dict without Ray.
"""

from __future__ import annotations

import torch
from ray.rllib.core.columns import Columns
from torch import nn

from rl.analysis.activations import ACTION_DIST_INPUTS, POLICY_ENCODER, VALUES, residual_stream_key


def encoder_names(module: nn.Module) -> list[str]:
    """The module's encoders (attribute names), the policy's first: rl.learners modules list theirs."""
    names = getattr(module, "encoder_names", None)
    return list(names()) if callable(names) else [POLICY_ENCODER]


class AnalysisView(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        self.has_residual_stream = callable(getattr(module, "residual_stream", None))
        self.encoders = encoder_names(module)

    def forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        if obs.dim() != 3:
            raise ValueError(f"observations must be (batch, time, obs_dim) from episode starts, got {tuple(obs.shape)}")
        batch = {Columns.OBS: obs}  # no STATE_IN: every sequence starts an episode
        outputs = {
            ACTION_DIST_INPUTS: self.module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS],
            VALUES: self.module.compute_values(batch),
        }
        if self.has_residual_stream:
            for encoder in self.encoders:
                outputs[residual_stream_key(encoder)] = residual_stream(self.module, obs, None, encoder).activations
        return outputs


def residual_stream(module: nn.Module, obs: torch.Tensor, state, encoder: str):
    """`module.residual_stream` of `encoder` after `state` (None: episode start); a single-encoder module needs no name."""
    if encoder == POLICY_ENCODER:
        return module.residual_stream(obs, state)
    return module.residual_stream(obs, state, encoder=encoder)
