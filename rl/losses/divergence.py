"""Divergences between action distributions.

# Behavioural cloning towards a frozen policy (PPG's auxiliary phase):
kl = categorical_kl(frozen_logits, logits, mask=loss_mask)
# Per step, from log-probabilities and probabilities already at hand (PPO's KL term):
per_step = categorical_kl_terms(old_log_probs, old_probs, log_probs, probs)
"""

from __future__ import annotations

import torch

from rl.losses.masking import check_shapes, masked_mean


def categorical_kl_terms(
    reference_log_probs: torch.Tensor, reference_probs: torch.Tensor, log_probs: torch.Tensor, probs: torch.Tensor
) -> torch.Tensor:
    """`KL(reference || policy)` per step over the last axis, as torch's kl_divergence of two Categoricals:
    inf where only the policy's probability is 0, nothing where the reference's is 0.

    PPO's KL term (rl.learners.ppo.loss) takes it per step; `categorical_kl` reduces it.
    """
    kl_terms = reference_probs * (reference_log_probs - log_probs)
    kl_terms = torch.where(probs == 0, float("inf"), kl_terms)
    return torch.where(reference_probs == 0, 0.0, kl_terms).sum(dim=-1)


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
    return masked_mean(
        categorical_kl_terms(reference_log_probs, reference_log_probs.exp(), log_probs, log_probs.exp()), mask
    )
