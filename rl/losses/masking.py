"""Masked reductions shared by every loss in this package.

    mean = masked_mean(per_step_loss, mask)   # mask: bool, same shape as the loss
    means = masked_means(torch.stack([surrogate, value_loss]), mask)   # several terms, one index

Padding and RLlib's artificial bootstrap step carry `mask == False`; their
values never reach the result, even when they are NaN or infinite.
"""

from __future__ import annotations

import torch


def check_shapes(name: str, tensor: torch.Tensor, expected: tuple[int, ...] | torch.Size, expected_from: str) -> None:
    """Raises ValueError unless `tensor.shape == expected` (names both sides).

    Example:
        check_shapes("targets", targets, quantiles.shape[:-1], "quantiles.shape[:-1]")
    """
    if tuple(tensor.shape) != tuple(expected):
        raise ValueError(
            f"{name} has shape {tuple(tensor.shape)} but must match {expected_from} = {tuple(expected)}; "
            f"reshape {name} or pass matching tensors."
        )


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of `values` over the entries where `mask` is True (all entries when mask is None).

    An all-False mask gives 0: no valid step contributes nothing to a loss.

    Example:
        >>> masked_mean(torch.tensor([1.0, 3.0, float("nan")]), torch.tensor([True, True, False]))
        tensor(2.)
    """
    if mask is None:
        return values.mean()
    check_shapes("mask", mask, values.shape, "values.shape")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}; pass `mask.bool()`.")
    total = torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum()
    return total / mask.sum().clamp(min=1)


def masked_means(terms: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Means over the valid steps of each stacked term: terms (K, *batch_shape), mask batch_shape or None -> (K,).

    One index for all K terms; per term the sum runs over the same values in the same
    order as RLlib's `torch.sum(term[mask]) / torch.sum(mask)`.

    Example:
        >>> masked_means(torch.tensor([[1.0, 3.0], [4.0, float("nan")]]), torch.tensor([True, False]))
        tensor([1., 4.])
    """
    if mask is None:
        return terms.flatten(1).mean(dim=-1)
    return terms[:, mask].sum(dim=-1) / mask.sum()
