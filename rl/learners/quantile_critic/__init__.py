"""PPO with a distributional (IQN or QR) critic, one feature folder in RLlib's layout.

    from rl.learners.quantile_critic import IQNPPOTorchLearner, IQNValueMixin
    from rl.learners.models import TransformerModel

    class IQNTransformerModel(IQNValueMixin, TransformerModel):
        pass

- `module.py`: the value-head mixins (IQNValueMixin, QRValueMixin) and their settings;
- `learner.py`: IQNPPOTorchLearner and QRPPOTorchLearner (the quantile Huber loss on the returns);
- `tests/`: the critic in a Learner (fast) and quantile recovery on known distributions.
The loss math itself is pure and lives in `rl.losses` (quantile_huber_loss, midpoint_taus).
"""

from rl.learners.quantile_critic.learner import IQNPPOTorchLearner, QRPPOTorchLearner, QuantileCriticLoss
from rl.learners.quantile_critic.module import (
    IQNValueConfig,
    IQNValueMixin,
    QRValueConfig,
    QRValueMixin,
    QuantileValueMixin,
)

__all__ = [
    "IQNPPOTorchLearner",
    "IQNValueConfig",
    "IQNValueMixin",
    "QRPPOTorchLearner",
    "QRValueConfig",
    "QRValueMixin",
    "QuantileCriticLoss",
    "QuantileValueMixin",
]
