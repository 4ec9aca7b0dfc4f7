"""MLPModel: the actor-critic module with a feed-forward encoder.

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from rl.learners.models import MLPModel

config = PPOConfig().environment("CartPole-v1").rl_module(
    rl_module_spec=RLModuleSpec(module_class=MLPModel, model_config={"hidden_sizes": [64, 64]})
)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from rl.learners.models.base import ActorCriticModule
from rl.learners.models.config import MLPConfig
from rl.learners.models.heads import HIDDEN_GAIN, init_linear

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


class MLPEncoder(nn.Module):
    """A stack of linear layers with the configured activation; stateless."""

    def __init__(self, input_dim: int, config: MLPConfig):
        super().__init__()
        layers: list[nn.Module] = []
        for size in config.hidden_sizes:
            layers += [init_linear(nn.Linear(input_dim, size), HIDDEN_GAIN), _ACTIVATIONS[config.activation]()]
            input_dim = size
        self.net = nn.Sequential(*layers)
        self.output_dim = input_dim

    def initial_state(self) -> dict[str, np.ndarray]:
        return {}

    def forward(self, obs: torch.Tensor, state_in: Any = None, *, with_state: bool = True) -> tuple[torch.Tensor, dict]:
        return self.net(obs), {}


class MLPModel(ActorCriticModule):
    """Actor-critic module over an MLP encoder; config: `MLPConfig`."""

    config_class = MLPConfig

    def build_encoder(self, input_dim: int) -> MLPEncoder:
        return MLPEncoder(input_dim, self.module_config)
