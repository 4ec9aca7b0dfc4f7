"""rl.losses: pure, shape-checked torch losses and composable Learner loss mixins.

from rl.losses import masked_mean, quantile_huber_loss, midpoint_taus, LossTermMixin
from rl.losses import categorical_prediction_loss, categorical_accuracy   # auxiliary prediction heads
from rl.losses import clipped_surrogate, categorical_entropy, categorical_kl_terms   # PPO's per-step terms
"""

from rl.losses.divergence import categorical_kl, categorical_kl_terms
from rl.losses.masking import check_shapes, masked_mean, masked_means
from rl.losses.mixin import LossTermMixin, LossTermOptions, read_options, require_number
from rl.losses.policy import categorical_entropy, clipped_surrogate, normalised_logits
from rl.losses.prediction import categorical_accuracy, categorical_prediction_loss
from rl.losses.quantile import midpoint_taus, quantile_huber_loss
from rl.losses.value import clipped_value_loss

__all__ = [
    "LossTermMixin",
    "LossTermOptions",
    "categorical_accuracy",
    "categorical_entropy",
    "categorical_kl",
    "categorical_kl_terms",
    "categorical_prediction_loss",
    "check_shapes",
    "clipped_surrogate",
    "clipped_value_loss",
    "masked_mean",
    "masked_means",
    "midpoint_taus",
    "normalised_logits",
    "quantile_huber_loss",
    "read_options",
    "require_number",
]
