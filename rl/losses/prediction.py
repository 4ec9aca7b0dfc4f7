"""Losses of auxiliary prediction heads: cross-entropy against integer class targets.

loss = categorical_prediction_loss(logits, targets, mask=loss_mask)   # logits (..., C), targets (...)
accuracy = categorical_accuracy(logits, targets, mask=loss_mask)
"""

from __future__ import annotations

import torch

from rl.losses.masking import check_shapes, masked_mean


def _checked_targets(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """`targets` validated against `logits`, with masked entries replaced by class 0 (padding may hold anything)."""
    check_shapes("targets", targets, logits.shape[:-1], "logits.shape[:-1]")
    if targets.dtype.is_floating_point or targets.dtype.is_complex or targets.dtype == torch.bool:
        raise ValueError(f"targets must hold integer class indices, got dtype {targets.dtype}; pass `targets.long()`.")
    if mask is not None:
        check_shapes("mask", mask, targets.shape, "targets.shape")
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor, got {mask.dtype}; pass `mask.bool()`.")
    num_classes = logits.shape[-1]
    valid = torch.ones_like(targets, dtype=torch.bool) if mask is None else mask
    out_of_range = valid & ((targets < 0) | (targets >= num_classes))
    # One host sync per call: a bad index would otherwise fail deep inside gather (a device assert on GPUs).
    if bool(out_of_range.any()):
        raise ValueError(
            f"targets hold class indices outside [0, {num_classes}) (e.g. {int(targets[out_of_range][0])}): "
            "the head predicts fewer classes than the data has; raise its number of classes."
        )
    return torch.where(valid, targets, torch.zeros((), dtype=targets.dtype, device=targets.device)).long()


def categorical_prediction_loss(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Masked mean cross-entropy `-log softmax(logits)[target]`; logits (..., C), targets (...) in [0, C).

    Example (uniform logits over 4 classes):
        >>> categorical_prediction_loss(torch.zeros(2, 4), torch.tensor([0, 3]))  # log 4
        tensor(1.3863)
    """
    safe_targets = _checked_targets(logits, targets, mask)
    log_probs = torch.log_softmax(logits, dim=-1)
    per_step = -log_probs.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)
    return masked_mean(per_step, mask)


def categorical_accuracy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Share of (unmasked) steps whose most likely class is the target; no gradient.

    Example:
        >>> categorical_accuracy(torch.tensor([[2.0, 1.0], [2.0, 1.0]]), torch.tensor([0, 1]))
        tensor(0.5000)
    """
    safe_targets = _checked_targets(logits, targets, mask)
    with torch.no_grad():
        hits = (logits.argmax(dim=-1) == safe_targets).to(logits.dtype)
        return masked_mean(hits, mask)
