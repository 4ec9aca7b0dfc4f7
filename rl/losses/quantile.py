"""Quantile regression losses for distributional critics (Dabney et al. 2017, 2018).

    taus = midpoint_taus(8)                                  # (8,): (i + 0.5) / 8
    loss = quantile_huber_loss(quantiles, taus, returns, kappa=1.0, mask=loss_mask)

`quantiles` is (..., N), `returns` and `mask` are (...); `taus` is (N,) or (..., N)
(IQN samples one set of taus per step).
"""

from __future__ import annotations

import torch

from rl.losses.masking import check_shapes, masked_mean


def midpoint_taus(num_quantiles: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """The fixed quantile levels `(i + 0.5) / N`, i = 0..N-1, of QR-DQN.

    Example:
        >>> midpoint_taus(4)
        tensor([0.1250, 0.3750, 0.6250, 0.8750])
    """
    if isinstance(num_quantiles, bool) or not isinstance(num_quantiles, int) or num_quantiles < 1:
        raise ValueError(f"num_quantiles must be a positive int, got {num_quantiles!r}.")
    return (torch.arange(num_quantiles, dtype=torch.float32, device=device) + 0.5) / num_quantiles


def quantile_huber_loss(
    quantiles: torch.Tensor,
    taus: torch.Tensor,
    targets: torch.Tensor,
    *,
    kappa: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """`|tau - 1{delta < 0}| * Huber_kappa(delta) / kappa`, delta = target - quantile.

    Averaged over the N quantiles and then over the steps where `mask` is True.
    Taus and targets receive no gradient.

    Example (one step, two quantiles, kappa 1):
        >>> quantile_huber_loss(torch.tensor([[0.0, 2.0]]), torch.tensor([0.25, 0.75]),
        ...                     torch.tensor([1.0]), kappa=1.0)
        tensor(0.1250)
    """
    if not kappa > 0:
        raise ValueError(f"kappa must be > 0 (the Huber threshold), got {kappa!r}; the papers use 1.0.")
    if quantiles.dim() < 1:
        raise ValueError("quantiles must have a trailing quantile dimension (..., N).")
    check_shapes("targets", targets, quantiles.shape[:-1], "quantiles.shape[:-1]")
    if taus.dim() == 1:
        check_shapes("taus", taus, quantiles.shape[-1:], "quantiles.shape[-1:]")
    else:
        check_shapes("taus", taus, quantiles.shape, "quantiles.shape")
    delta = targets.detach().unsqueeze(-1) - quantiles
    abs_delta = delta.abs()
    huber = torch.where(abs_delta <= kappa, 0.5 * delta.pow(2), kappa * (abs_delta - 0.5 * kappa))
    weight = (taus.detach() - (delta.detach() < 0).to(quantiles.dtype)).abs()
    per_step = (weight * huber / kappa).mean(dim=-1)
    return masked_mean(per_step, mask)
