"""Actor-critic RLModules and the auxiliary prediction heads.

    from rl.learners.models import MLPModel, TransformerModel

Heads that belong to one algorithm live in its feature folder: PPG's in `rl.learners.ppg`,
the IQN/QR critics' in `rl.learners.quantile_critic`. The seed project imported them from here,
so they still import from here too (lazily: those folders import this package's modules):

    from rl.learners.models import PPGAuxiliaryValueHead, TransformerModel, IQNValueMixin, QRValueMixin

    class AuxTransformer(NextTokenAuxHead, StateAuxHead, TransformerModel):   # auxiliary prediction heads
        pass
"""

import importlib
from typing import Any

from rl.learners.models.aux_heads import (
    NextTokenAuxConfig,
    NextTokenAuxHead,
    NextTokenAuxMLPModel,
    NextTokenAuxTransformerModel,
    StateAuxConfig,
    StateAuxHead,
    StateAuxTransformerModel,
)
from rl.learners.models.base import ACTOR_ENCODER, CRITIC_EMBEDDINGS, CRITIC_ENCODER, ActorCriticModule, observation_dim
from rl.learners.models.config import ActorCriticConfig, ConfigError, MLPConfig, TransformerConfig
from rl.learners.models.mlp import MLPModel
from rl.learners.models.transformer import ResidualStream, TransformerModel

# The seed project's import paths of heads that now live in feature folders.
_FEATURE_FOLDER_EXPORTS = {
    "IQNValueMixin": "rl.learners.quantile_critic.module",
    "PPGAuxiliaryValueHead": "rl.learners.ppg.module",
    "QRValueMixin": "rl.learners.quantile_critic.module",
}

__all__ = [
    "ACTOR_ENCODER",
    "CRITIC_EMBEDDINGS",
    "CRITIC_ENCODER",
    "ActorCriticConfig",
    "ActorCriticModule",
    "ConfigError",
    "IQNValueMixin",
    "MLPConfig",
    "MLPModel",
    "NextTokenAuxConfig",
    "NextTokenAuxHead",
    "NextTokenAuxMLPModel",
    "NextTokenAuxTransformerModel",
    "PPGAuxiliaryValueHead",
    "QRValueMixin",
    "ResidualStream",
    "StateAuxConfig",
    "StateAuxHead",
    "StateAuxTransformerModel",
    "TransformerConfig",
    "TransformerModel",
    "observation_dim",
]


def __getattr__(name: str) -> Any:
    if name in _FEATURE_FOLDER_EXPORTS:
        return getattr(importlib.import_module(_FEATURE_FOLDER_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl.learners.models' has no attribute {name!r}")
