"""Divergences between action distributions.

    # Behavioural cloning towards a frozen policy (PPG's auxiliary phase):
    kl = categorical_kl(frozen_logits, logits, mask=loss_mask)
"""

from __future__ import annotations

import torch

from rl.losses.masking import check_shapes, masked_mean


def categorical_kl(
    reference_logits: torch.Tensor,
    logits: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Masked mean of `KL(softmax(reference_logits) || softmax(logits))` over the last axis.

    The reference is a target: it receives no gradient.

    Example (uniform reference, point-ish policy):
        >>> categorical_kl(torch.zeros(1, 2), torch.tensor([[0.0, -100.0]]))  # ~ 0.5 * 100 - log 2
        tensor(49.3069)
    """
    check_shapes("logits", logits, reference_logits.shape, "reference_logits.shape")
    reference_log_probs = torch.log_softmax(reference_logits.detach(), dim=-1)
    log_probs = torch.log_softmax(logits, dim=-1)
    per_step = (reference_log_probs.exp() * (reference_log_probs - log_probs)).sum(dim=-1)
    return masked_mean(per_step, mask)
