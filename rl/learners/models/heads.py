"""Heads of the actor-critic modules: policy heads per action space and a scalar value head.

pi = build_policy_head(gym.spaces.Discrete(2), input_dim=64)   # logits (..., 2)
vf = ValueHead(64)                                               # values (...)
"""

from __future__ import annotations

import math

import gymnasium as gym
import torch
from torch import nn


def init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    """Orthogonal weights scaled by `gain`, zero bias (the usual PPO initialisation)."""
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


# Small initial logits give a near-uniform first policy; PPO implementations use 0.01.
POLICY_GAIN = 0.01
HIDDEN_GAIN = math.sqrt(2.0)


class DiagGaussianHead(nn.Module):
    """Mean from the features, state-independent learned log-std (initially 0).

    Outputs `[mean, log_std]` concatenated, the input format of RLlib's TorchDiagGaussian.
    """

    def __init__(self, input_dim: int, action_dim: int):
        super().__init__()
        self.mean = init_linear(nn.Linear(input_dim, action_dim), POLICY_GAIN)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        mean = self.mean(features)
        return torch.cat([mean, self.log_std.expand_as(mean)], dim=-1)


def build_policy_head(action_space: gym.Space, input_dim: int) -> nn.Module:
    """Categorical logits for Discrete actions, a diagonal Gaussian for 1-D Box actions."""
    if isinstance(action_space, gym.spaces.Discrete):
        return init_linear(nn.Linear(input_dim, int(action_space.n)), POLICY_GAIN)
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return DiagGaussianHead(input_dim, action_space.shape[0])
    raise ValueError(
        f"unsupported action space {action_space}: the actor-critic modules handle Discrete and 1-D Box "
        "actions; flatten other spaces in the environment."
    )


class ValueHead(nn.Module):
    """A linear map from features to one value per step (the trailing 1 squeezed)."""

    def __init__(self, input_dim: int):
        super().__init__()
        self.linear = init_linear(nn.Linear(input_dim, 1), 1.0)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear(features).squeeze(-1)
