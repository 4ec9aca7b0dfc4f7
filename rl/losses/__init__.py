"""rl.losses: pure, shape-checked torch losses and composable Learner loss mixins.

    from rl.losses import masked_mean, quantile_huber_loss, midpoint_taus, LossTermMixin
"""

from rl.losses.divergence import categorical_kl
from rl.losses.masking import check_shapes, masked_mean
from rl.losses.mixin import LossTermMixin, LossTermOptions, read_options, require_number
from rl.losses.quantile import midpoint_taus, quantile_huber_loss
from rl.losses.value import clipped_value_loss

__all__ = [
    "LossTermMixin",
    "LossTermOptions",
    "categorical_kl",
    "check_shapes",
    "clipped_value_loss",
    "masked_mean",
    "midpoint_taus",
    "quantile_huber_loss",
    "read_options",
    "require_number",
]
