"""Actor-critic RLModules and value-head mixins.

    from rl.learners.models import MLPModel, TransformerModel, IQNValueMixin, QRValueMixin

    class IQNTransformerModel(IQNValueMixin, TransformerModel):
        pass

    class PPGTransformer(PPGAuxiliaryValueHead, TransformerModel):   # PPG's detach design
        pass

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
from rl.learners.models.ppg_head import PPGAuxiliaryValueHead, PPGMLPModel, PPGTransformerModel
from rl.learners.models.quantile_value import (
    IQNValueMixin,
    IQNValueSettings,
    QRValueMixin,
    QRValueSettings,
    QuantileValueMixin,
)
from rl.learners.models.transformer import ResidualStream, TransformerModel

__all__ = [
    "ActorCriticModule",
    "ActorCriticSettings",
    "IQNValueMixin",
    "IQNValueSettings",
    "MLPModel",
    "MLPSettings",
    "NextTokenAuxHead",
    "NextTokenAuxMLPModel",
    "NextTokenAuxSettings",
    "NextTokenAuxTransformerModel",
    "PPGAuxiliaryValueHead",
    "PPGMLPModel",
    "PPGTransformerModel",
    "QRValueMixin",
    "QRValueSettings",
    "QuantileValueMixin",
    "ResidualStream",
    "StateAuxHead",
    "StateAuxSettings",
    "StateAuxTransformerModel",
    "TransformerModel",
    "TransformerSettings",
]
