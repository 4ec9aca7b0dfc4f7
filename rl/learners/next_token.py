"""Supervised next-token prediction with the TransformerModel's encoder: a reference for belief probes.

    from rl.learners.models import TransformerConfig
    from rl.learners.next_token import NextTokenModel, NextTokenTraining, train_next_token

    model = NextTokenModel(num_tokens=3, config=TransformerConfig(d_model=64, n_heads=1, n_layers=4,
                                                                    memory_len=10))
    train_next_token(model, sample_tokens, NextTokenTraining(steps=5000), log=print)
    model.residual_stream(one_hot_tokens).activations        # what rl.analysis probes

`sample_tokens(batch_size)` returns (batch, length) int tokens; the loss is the mean
cross-entropy (nats) of the logits after tokens 1..t for token t + 1, over every position.
No RLlib training: the encoder is the same module an RL agent uses, so what a probe finds here
is what the probe pipeline can find in that architecture when the task asks for prediction.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Collection, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rl.learners.models.config import TransformerConfig, require_positive_int
from rl.learners.models.transformer import ResidualStream, TransformerEncoder


class NextTokenModel(nn.Module):
    """TransformerEncoder over one-hot tokens (B, T, num_tokens), then a linear head: next-token logits."""

    def __init__(self, *, num_tokens: int, config: TransformerConfig):
        super().__init__()
        require_positive_int("num_tokens", num_tokens)
        self.num_tokens = num_tokens
        self.encoder = TransformerEncoder(num_tokens, config)
        self.token_head = nn.Linear(config.d_model, num_tokens)

    def one_hot(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) int tokens -> (B, T, num_tokens) float: the encoder's input."""
        return F.one_hot(tokens, self.num_tokens).to(torch.float32)

    def forward(self, one_hot_tokens: torch.Tensor) -> torch.Tensor:
        """(B, T, num_tokens) -> (B, T, num_tokens) logits of the token after each position."""
        embeddings, _ = self.encoder(one_hot_tokens, None)  # every sequence starts at its first token
        return self.token_head(embeddings)

    def residual_stream(self, one_hot_tokens: torch.Tensor) -> ResidualStream:
        return self.encoder.residual_stream(one_hot_tokens)


@dataclasses.dataclass(frozen=True)
class NextTokenTraining:
    """AdamW with a linear warm-up then cosine decay to zero over `steps` minibatches."""

    steps: int
    batch_size: int = 128
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.0
    log_every: int = 100

    def __post_init__(self):
        for name in ("steps", "batch_size", "log_every"):
            require_positive_int(name, getattr(self, name))
        if self.warmup_steps < 0 or not self.learning_rate > 0 or self.weight_decay < 0:
            raise ValueError(f"need warmup_steps >= 0, learning_rate > 0, weight_decay >= 0; got {self}")

    def learning_rate_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        return self.learning_rate * 0.5 * (1.0 + math.cos(math.pi * progress))


def train_next_token(
    model: NextTokenModel,
    sample_tokens: Callable[[int], np.ndarray],
    training: NextTokenTraining,
    *,
    log: Callable[[Mapping[str, float]], None],
    snapshot_steps: Collection[int] = (),
    on_snapshot: Callable[[int], None] = lambda step: None,
    should_stop: Callable[[], bool] = lambda: False,
) -> dict[str, float]:
    """Trains `model` in place on fresh minibatches and returns the last logged row.

    Logs {step, loss, learning_rate, seconds} every `log_every` steps and after the last one (loss:
    the mean over the minibatches since the previous row; seconds: training time, snapshots excluded). Calls `on_snapshot(step)` (model in
    eval mode, no gradients) after each step in `snapshot_steps`, 0 meaning before training.
    `should_stop()` is checked before each step (e.g. on SIGTERM); a stopped run ends with a row.
    """
    unknown = sorted(step for step in snapshot_steps if not 0 <= step <= training.steps)
    if unknown:
        raise ValueError(f"snapshot_steps {unknown} lie outside 0..{training.steps}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay)
    started, losses, row, done = time.perf_counter(), [], {}, 0
    snapshot_seconds = 0.0  # left out of the logged training time

    def log_row() -> dict[str, float]:
        logged = {
            "step": done,
            "loss": float(np.mean(losses)),
            "learning_rate": training.learning_rate_at(done - 1),
            "seconds": time.perf_counter() - started - snapshot_seconds,
        }
        log(logged)
        losses.clear()
        return logged

    def snapshot() -> None:
        nonlocal snapshot_seconds
        begun = time.perf_counter()
        model.eval()
        with torch.no_grad():
            on_snapshot(done)
        model.train()
        snapshot_seconds += time.perf_counter() - begun

    if 0 in snapshot_steps:
        snapshot()
    model.train()
    while done < training.steps and not should_stop():
        for group in optimizer.param_groups:
            group["lr"] = training.learning_rate_at(done)
        tokens = torch.as_tensor(sample_tokens(training.batch_size), dtype=torch.int64)
        if tokens.dim() != 2 or tokens.shape[1] < 2:
            raise ValueError(f"sample_tokens must return (batch, length >= 2) tokens, got shape {tuple(tokens.shape)}")
        logits = model(model.one_hot(tokens[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, model.num_tokens), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        done += 1
        if done % training.log_every == 0 or done == training.steps:
            row = log_row()
        if done in snapshot_steps:
            snapshot()
    if losses:  # stopped between two rows
        row = log_row()
    model.eval()
    return row
