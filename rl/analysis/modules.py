"""A uniform view of an actor-critic RLModule for analysis (rl.learners' MLPModel, TransformerModel).

    from rl.analysis.modules import AnalysisView

    view = AnalysisView(module)           # e.g. rl.analysis.checkpoints.load_rl_module(path)
    outputs = view(obs)                   # obs (B, T, obs_dim) from episode starts
    outputs["residual_stream"]            # (n_layers + 1, B, T, d_model): TransformerModel only

It is an `nn.Module`, so `torch.export` can turn it into a portable program
(rl.analysis.portable.export_portable_module) that returns the same dict without Ray.
"""

from __future__ import annotations

import torch
from ray.rllib.core.columns import Columns
from torch import nn

from rl.analysis.activations import ACTION_DIST_INPUTS, RESIDUAL_STREAM, VALUES


class AnalysisView(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        self.has_residual_stream = callable(getattr(module, "residual_stream", None))

    def forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        if obs.dim() != 3:
            raise ValueError(f"observations must be (batch, time, obs_dim) from episode starts, got {tuple(obs.shape)}")
        batch = {Columns.OBS: obs}  # no STATE_IN: every sequence starts an episode
        outputs = {
            ACTION_DIST_INPUTS: self.module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS],
            VALUES: self.module.compute_values(batch),
        }
        if self.has_residual_stream:
            outputs[RESIDUAL_STREAM] = self.module.residual_stream(obs).activations
        return outputs
