"""Value-function regression losses.

loss = clipped_value_loss(values, old_values, value_targets, clip=10.0, mask=loss_mask)
"""

from __future__ import annotations

import torch

from rl.losses.masking import check_shapes, masked_mean


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    targets: torch.Tensor,
    *,
    clip: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """PPO2's clipped value loss: `0.5 * max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2)`.

    The new prediction may move at most `clip` away from the prediction made when
    the data was collected before the loss stops rewarding it. `old_values` and
    `targets` receive no gradient.

    Example:
        >>> clipped_value_loss(torch.tensor([3.0]), torch.tensor([0.0]), torch.tensor([3.0]), clip=1.0)
        tensor(2.)
    """
    if not clip > 0:
        raise ValueError(f"clip must be > 0, got {clip!r}; use a plain squared error to disable clipping.")
    check_shapes("old_values", old_values, values.shape, "values.shape")
    check_shapes("targets", targets, values.shape, "values.shape")
    old_values, targets = old_values.detach(), targets.detach()
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    per_step = 0.5 * torch.maximum((values - targets).pow(2), (clipped - targets).pow(2))
    return masked_mean(per_step, mask)
