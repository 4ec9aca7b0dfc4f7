"""Token sequences of a FiniteHMM: sampled in batches, and the exact next-token entropies they are scored against.

    tokens = sample_sequences(model, num_sequences=256, length=11, rng=np.random.default_rng(0))
    probabilities = sequence_probabilities(model, tokens)          # (256,) P(x_1..x_11)
    entropies = next_token_entropies(model, max_context_length=10)   # nats, H(X_{t+1} | X_1..X_t), t = 0..10

A predictor that reads t tokens can at best reach cross-entropy `entropies[t]` on the next one
(the entropy of the next-token distribution under the exact belief, averaged over contexts as
the process emits them); `entropies[t]` decreases towards the process's entropy rate.
"""

from __future__ import annotations

import numpy as np

from rl.envs.hmm.belief import belief_step, next_token_probabilities, start_belief
from rl.envs.hmm.model import FiniteHMM


def sample_sequences(
    model: FiniteHMM, *, num_sequences: int, length: int, rng: np.random.Generator, prior: np.ndarray | None = None
) -> np.ndarray:
    """(num_sequences, length) int64 tokens, each sequence started from `prior` (default: stationary)."""
    if num_sequences < 1 or length < 1:
        raise ValueError(f"need num_sequences >= 1 and length >= 1, got {num_sequences} and {length}")
    states = _draw(np.cumsum(start_belief(model, prior))[None], np.zeros(num_sequences, dtype=np.int64), rng)
    # One joint draw of (token, next state) per step: column k * num_states + j of joint_rows.
    joint_cdf = np.cumsum(model.joint_rows, axis=1)
    tokens = np.empty((num_sequences, length), dtype=np.int64)
    for position in range(length):
        tokens[:, position], states = np.divmod(_draw(joint_cdf, states, rng), model.num_states)
    return tokens


def sequence_probabilities(model: FiniteHMM, tokens: np.ndarray, prior: np.ndarray | None = None) -> np.ndarray:
    """(batch,) probability of each row of `tokens` (batch, length) under the process started from `prior`."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2:
        raise ValueError(f"tokens have shape {tokens.shape}; expected (batch, length)")
    beliefs = np.tile(start_belief(model, prior), (len(tokens), 1))
    probabilities = np.ones(len(tokens))
    for position in range(tokens.shape[1]):
        unnormalized = np.einsum("bi,bij->bj", beliefs, model.transition_matrices[tokens[:, position]])
        totals = unnormalized.sum(axis=1)  # P(this token | the tokens before)
        probabilities *= totals
        # An impossible sequence stays at probability 0 (belief_step would raise on it).
        beliefs = np.where(totals[:, None] > 0, unnormalized / np.where(totals > 0, totals, 1.0)[:, None], beliefs)
    return probabilities


def next_token_entropies(model: FiniteHMM, *, max_context_length: int, prior: np.ndarray | None = None) -> np.ndarray:
    """(max_context_length + 1,) nats: entry t is H(X_{t+1} | X_1..X_t), the optimal next-token cross-entropy.

    Exact: every context of length t is carried with its probability and belief (num_tokens**t of
    them, so keep max_context_length small), and the next token's entropy under each belief is
    averaged with those probabilities. Contexts of probability zero are dropped.
    """
    if max_context_length < 0:
        raise ValueError(f"max_context_length must be >= 0, got {max_context_length}")
    beliefs = start_belief(model, prior)[None]
    probabilities = np.ones(1)
    entropies = []
    for context_length in range(max_context_length + 1):
        next_tokens = next_token_probabilities(model, beliefs)  # (contexts, num_tokens)
        with np.errstate(divide="ignore"):
            surprise = np.where(next_tokens > 0, -np.log(next_tokens), 0.0)
        entropies.append(float(probabilities @ (next_tokens * surprise).sum(axis=1)))
        if context_length == max_context_length:
            break
        # Extend every context by every possible token (row c * num_tokens + k: context c, then token k).
        extended = (probabilities[:, None] * next_tokens).ravel()
        possible = extended > 0
        parents = np.repeat(np.arange(len(beliefs)), model.num_tokens)[possible]
        tokens = np.tile(np.arange(model.num_tokens), len(beliefs))[possible]
        beliefs, probabilities = belief_step(model, beliefs[parents], tokens), extended[possible]
    return np.array(entropies)


def _draw(cdf: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One column index per entry of `rows`, drawn from row rows[i] of the cumulative table `cdf`."""
    row_cdf = cdf[rows]
    uniform = rng.random(len(rows)) * row_cdf[:, -1]  # rows summing to 1 within round-off
    return np.minimum((uniform[:, None] >= row_cdf).sum(axis=1), cdf.shape[1] - 1)
