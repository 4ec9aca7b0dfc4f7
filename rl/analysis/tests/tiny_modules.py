"""Small untrained rl.learners modules over one-hot Mess3 tokens, for fast tests.

module = tiny_transformer(seed=0)      # eval mode; obs (B, T, 3), actions Discrete(2)
module = tiny_transformer(seed=0, separate_critic=True)   # with a critic encoder of its own
"""

import gymnasium as gym
import numpy as np
import torch

from rl.learners.models import MLPModel, TransformerModel

SPACES = {"observation_space": gym.spaces.Box(0.0, 1.0, (3,), np.float32), "action_space": gym.spaces.Discrete(2)}
TRANSFORMER_CONFIG = {
    "d_model": 16,
    "n_heads": 2,
    "n_layers": 2,
    "feedforward_dim": 32,
    "memory_len": 12,
    "max_seq_len": 12,
    "vf_share_layers": True,
}


def tiny_transformer(seed: int, *, separate_critic: bool = False) -> TransformerModel:
    torch.manual_seed(seed)
    return TransformerModel(
        **SPACES, model_config={**TRANSFORMER_CONFIG, "vf_share_layers": not separate_critic}
    ).eval()


def tiny_mlp(seed: int) -> MLPModel:
    torch.manual_seed(seed)
    return MLPModel(**SPACES, model_config={"hidden_sizes": [8, 8]}).eval()
