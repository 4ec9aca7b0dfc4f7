"""NextTokenModel and train_next_token: a process with a known optimum, snapshots, stopping."""

import numpy as np
import pytest
import torch

from rl.learners.models.config import TransformerConfig
from rl.learners.next_token import NextTokenModel, NextTokenTraining, train_next_token

TINY = TransformerConfig(d_model=16, n_heads=1, n_layers=1, feedforward_dim=32, memory_len=4, max_seq_len=4)


def cycles(batch: int, rng: np.random.Generator) -> np.ndarray:
    """0, 1, 2, 0, ... from a random phase: after the first token the next one is certain (optimum: 0 nats)."""
    return (rng.integers(0, 3, size=(batch, 1)) + np.arange(5)) % 3


def test_it_learns_a_deterministic_successor_and_exposes_its_residual_stream():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = NextTokenModel(num_tokens=3, config=TINY)
    rows = []
    last = train_next_token(
        model,
        lambda batch: cycles(batch, rng),
        NextTokenTraining(steps=150, batch_size=32, learning_rate=1e-2, warmup_steps=10, log_every=50),
        log=rows.append,
    )
    assert [row["step"] for row in rows] == [50, 100, 150] and last == rows[-1]
    assert rows[0]["loss"] < np.log(3)  # the untrained model sits near ln 3 (uniform guesses)
    assert last["loss"] < 0.05, rows  # the optimum is 0
    assert not model.training
    stream = model.residual_stream(model.one_hot(torch.as_tensor(cycles(7, rng))))
    assert stream.activations.shape == (TINY.n_layers + 1, 7, 5, TINY.d_model)


def test_snapshots_run_in_eval_mode_without_gradients_and_a_stop_ends_with_a_row():
    model = NextTokenModel(num_tokens=3, config=TINY)
    rng, sampled, seen, rows = np.random.default_rng(1), [], [], []
    stop_after = 7

    def sample(batch):
        sampled.append(batch)
        return cycles(batch, rng)

    training = NextTokenTraining(steps=20, batch_size=4, warmup_steps=2, log_every=5)
    last = train_next_token(
        model,
        sample,
        training,
        log=rows.append,
        snapshot_steps=(0, 3, 20),
        on_snapshot=lambda step: seen.append((step, model.training, torch.is_grad_enabled())),
        should_stop=lambda: len(sampled) == stop_after,
    )
    assert seen == [(0, False, False), (3, False, False)]  # stopped before step 20
    assert [row["step"] for row in rows] == [5, stop_after] and last["step"] == stop_after
    with pytest.raises(ValueError, match=r"snapshot_steps \[21\] lie outside 0..20"):
        train_next_token(model, sample, training, log=rows.append, snapshot_steps=(21,))


def test_the_schedule_warms_up_then_decays_to_zero():
    training = NextTokenTraining(steps=110, learning_rate=1e-3, warmup_steps=10)
    assert training.learning_rate_at(0) == pytest.approx(1e-4)
    assert training.learning_rate_at(9) == pytest.approx(1e-3)
    assert training.learning_rate_at(60) == pytest.approx(0.5e-3)  # half-way through the cosine
    assert training.learning_rate_at(110) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        NextTokenTraining(steps=0)
