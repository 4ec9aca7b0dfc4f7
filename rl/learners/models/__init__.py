"""Actor-critic RLModules and value-head mixins.

    from rl.learners.models import MLPModel, TransformerModel, IQNValueMixin, QRValueMixin

    class IQNTransformerModel(IQNValueMixin, TransformerModel):
        pass

    class PPGTransformer(PPGAuxiliaryValueHead, TransformerModel):   # PPG's detach design
        pass
"""

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
    "PPGAuxiliaryValueHead",
    "PPGMLPModel",
    "PPGTransformerModel",
    "QRValueMixin",
    "QRValueSettings",
    "QuantileValueMixin",
    "ResidualStream",
    "TransformerModel",
    "TransformerSettings",
]
