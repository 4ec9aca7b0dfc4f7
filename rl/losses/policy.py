"""Policy-gradient terms for Categorical policies, per step, as torch's distributions compute them.

    log_probs = normalised_logits(logits)                       # (B, T, A), as Categorical(logits=...) keeps them
    surrogate = clipped_surrogate(log_probs, actions, old_action_log_probs, advantages, clip=0.2)   # (B, T)
    entropy = categorical_entropy(log_probs, log_probs.softmax(dim=-1))                            # (B, T)

Each returns the per-step term; the caller weighs the terms and reduces them with
`masked_mean`/`masked_means`, so one index serves every term of a loss (rl.learners.ppo.loss).
The formulas follow torch's Categorical and RLlib's PPO step for step, so a loss built from them
has RLlib's values and gradients bit for bit (rl/learners/tests/ppo_loss_test.py).
"""

from __future__ import annotations

import torch


def normalised_logits(logits: torch.Tensor) -> torch.Tensor:
    """Log-probabilities as torch's Categorical(logits=...) stores them."""
    return logits - logits.logsumexp(dim=-1, keepdim=True)


def categorical_entropy(log_probs: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Entropy per step, as torch's Categorical.entropy (log-probabilities clamped to the dtype's minimum)."""
    return -(log_probs.clamp(min=torch.finfo(log_probs.dtype).min) * probs).sum(dim=-1)


def clipped_surrogate(
    log_probs: torch.Tensor,
    actions: torch.Tensor,
    old_action_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip: float,
) -> torch.Tensor:
    """PPO's clipped surrogate objective per step (to maximise): min(A r, A clip(r, 1 - clip, 1 + clip)).

    `log_probs` (*batch, A) of the current policy, `actions` (*batch) integer, `old_action_log_probs`
    and `advantages` (*batch); r = exp(log pi(a) - log pi_old(a)).

    Example (r = 0.5 / 0.45 = 1.11 is clipped to 1.05 for a positive advantage: 2 x 1.05):
        >>> clipped_surrogate(torch.log(torch.tensor([[0.5, 0.5]])), torch.tensor([0]),
        ...                   torch.log(torch.tensor([0.45])), torch.tensor([2.0]), clip=0.05)
        tensor([2.1000])
    """
    ratio = torch.exp(log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1) - old_action_log_probs)
    return torch.min(advantages * ratio, advantages * torch.clamp(ratio, 1 - clip, 1 + clip))
