"""Actor-critic RLModules and the auxiliary prediction heads.

    from rl.learners.models import MLPModel, TransformerModel

Heads that belong to one algorithm live in its feature folder: PPG's in `rl.learners.ppg`,
the IQN/QR critics' in `rl.learners.quantile_critic`.

    class AuxTransformer(NextTokenAuxHead, StateAuxHead, TransformerModel):   # auxiliary prediction heads
        pass
"""

from rl.learners.models.aux_heads import (
    NextTokenAuxHead,
    NextTokenAuxMLPModel,
    NextTokenAuxSettings,
    NextTokenAuxTransformerModel,
    StateAuxHead,
    StateAuxSettings,
    StateAuxTransformerModel,
)
from rl.learners.models.base import ActorCriticModule
from rl.learners.models.config import ActorCriticSettings, MLPSettings, TransformerSettings
from rl.learners.models.mlp import MLPModel
from rl.learners.models.transformer import ResidualStream, TransformerModel

__all__ = [
    "ActorCriticModule",
    "ActorCriticSettings",
    "MLPModel",
    "MLPSettings",
    "NextTokenAuxHead",
    "NextTokenAuxMLPModel",
    "NextTokenAuxSettings",
    "NextTokenAuxTransformerModel",
    "ResidualStream",
    "StateAuxHead",
    "StateAuxSettings",
    "StateAuxTransformerModel",
    "TransformerModel",
    "TransformerSettings",
]
