"""FiniteHMM validation, conversion, exact belief filtering and token sequences, against the Mess3 facts of the shared notes."""

import numpy as np
import pytest

from rl.envs.hmm import FiniteHMM, belief_after, belief_step, next_token_probabilities
from rl.envs.hmm.sequences import next_token_entropies, sample_sequences, sequence_probabilities
from rl.envs.mess3 import mess3_process

# Shared notes, section 2: Mess3 at x = 0.05, a = 0.85.
AFTER_ONE_ZERO = [0.85, 0.075, 0.075]
ZEROS_FIXED_POINT = [0.98931, 0.00534, 0.00534]


def test_validation_names_the_offending_row():
    matrices = np.zeros((2, 3, 3))
    matrices[0] = np.eye(3)
    matrices[1, 2, 0] = 0.5  # state 2 now sums to 1.5
    with pytest.raises(ValueError, match=r"row of state 2 .* sums to 1\.5"):
        FiniteHMM(matrices)
    matrices[1, 2, 0] = -0.5
    with pytest.raises(ValueError, match=r"transition_matrices\[1, 2, 0\] = -0\.5.*nonnegative"):
        FiniteHMM(matrices)
    with pytest.raises(ValueError, match="expected \\(num_tokens, num_states, num_states\\)"):
        FiniteHMM(np.ones((2, 3)))


def test_model_is_immutable():
    model = mess3_process()
    with pytest.raises(ValueError):
        model.transition_matrices[0, 0, 0] = 1.0


@pytest.mark.parametrize("emitted_by", ["source", "destination"])
def test_state_emitting_conversion(emitted_by):
    transition = np.array([[0.9, 0.1], [0.3, 0.7]])
    emission = np.array([[0.6, 0.4], [0.2, 0.8]])
    model = FiniteHMM.from_state_emitting(transition, emission, emitted_by=emitted_by)
    emitter = 0 if emitted_by == "source" else 1  # the state (i or j) whose emission row applies
    for k in range(2):
        for i in range(2):
            for j in range(2):
                expected = transition[i, j] * emission[(i, j)[emitter], k]
                assert model.transition_matrices[k, i, j] == pytest.approx(expected)
    np.testing.assert_allclose(model.state_transition_matrix, transition)
    with pytest.raises(ValueError, match="emission: row \\[1\\] sums to 0.9"):
        FiniteHMM.from_state_emitting(transition, [[0.6, 0.4], [0.2, 0.7]], emitted_by=emitted_by)


def test_stationary_distribution():
    np.testing.assert_allclose(mess3_process().stationary_distribution(), [1 / 3] * 3, atol=1e-12)
    # two-state chain with P(0->1) = 0.1, P(1->0) = 0.3: pi = (0.75, 0.25)
    model = FiniteHMM.from_state_emitting([[0.9, 0.1], [0.3, 0.7]], np.eye(2), emitted_by="source")
    np.testing.assert_allclose(model.stationary_distribution(), [0.75, 0.25])
    reducible = FiniteHMM(np.eye(2)[None])
    with pytest.raises(ValueError, match="2 independent stationary distributions.*explicit prior"):
        reducible.stationary_distribution()


@pytest.mark.parametrize("x", [0.02, 1e-3, 1e-6])
def test_stationary_distribution_of_slowly_mixing_chains(x):
    # Mess3's chain is symmetric, so its stationary distribution is uniform for every x > 0
    # (shared notes); its non-unit eigenvalues are 1 - 3x, so P^T - I's largest singular value is 3x.
    np.testing.assert_allclose(mess3_process(x=x).stationary_distribution(), [1 / 3] * 3, atol=1e-9)
    # P(0->1) = 1e-5, P(1->0) = 3e-5: pi = (0.75, 0.25), as for the fast chain above.
    slow = FiniteHMM.from_state_emitting([[1 - 1e-5, 1e-5], [3e-5, 1 - 3e-5]], np.eye(2), emitted_by="source")
    np.testing.assert_allclose(slow.stationary_distribution(), [0.75, 0.25], atol=1e-9)


def test_mess3_beliefs_match_the_notes():
    model = mess3_process()
    np.testing.assert_allclose(belief_after(model, [0]), AFTER_ONE_ZERO, atol=1e-12)
    np.testing.assert_allclose(belief_after(model, [0] * 200), ZEROS_FIXED_POINT, atol=1e-5)


def test_no_underflow_over_a_million_tokens():
    model = mess3_process()
    rng = np.random.default_rng(0)
    # its unnormalised probability, (1/3)**(10**6), would underflow after about 700 tokens
    random_tokens = rng.integers(0, 3, size=10**6)
    belief = belief_after(model, random_tokens)
    assert np.all(np.isfinite(belief)) and belief.sum() == pytest.approx(1.0) and belief.min() > 0
    np.testing.assert_allclose(belief, belief_after(model, random_tokens[-200:]), atol=1e-9)  # memory is short


def test_batched_step_equals_single_steps():
    model = mess3_process()
    rng = np.random.default_rng(1)
    beliefs = rng.dirichlet(np.ones(3), size=64)
    tokens = rng.integers(0, 3, size=64)
    batched = belief_step(model, beliefs, tokens)
    for belief, token, expected in zip(beliefs, tokens, batched):
        unnormalized = belief @ model.transition_matrices[token]
        np.testing.assert_allclose(expected, unnormalized / unnormalized.sum(), rtol=1e-12)
    sequences = rng.integers(0, 3, size=(5, 40))
    for sequence, belief in zip(sequences, belief_after(model, sequences)):
        np.testing.assert_allclose(belief, belief_after(model, sequence), rtol=1e-12)


def test_bad_tokens_are_errors():
    model = FiniteHMM.from_state_emitting([[1.0, 0.0], [0.0, 1.0]], np.eye(2), emitted_by="destination")
    with pytest.raises(ValueError, match="token 1 at position 2 has probability zero"):
        belief_after(model, [0, 0, 1], prior=[1.0, 0.0])
    with pytest.raises(ValueError, match="token 1 \\(batch index \\(1,\\)\\) has probability zero"):
        belief_step(model, np.array([[0.5, 0.5], [1.0, 0.0]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="out of range"):
        belief_step(model, np.array([0.5, 0.5]), 2)
    with pytest.raises(ValueError, match="must lie in \\[0, 2\\)"):
        belief_step(model, np.array([[0.5, 0.5]]), np.array([-1]))


def test_next_token_probabilities():
    # uniform belief: each token 1/3; otherwise move with the 0.9/0.05 chain, then state 0 emits 0 w.p. 0.85
    model = mess3_process()
    np.testing.assert_allclose(next_token_probabilities(model, [1 / 3] * 3), [1 / 3] * 3, atol=1e-12)
    belief = np.array(AFTER_ONE_ZERO)
    moved = belief @ np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]])
    np.testing.assert_allclose(next_token_probabilities(model, belief)[0], moved[0] * 0.85 + (1 - moved[0]) * 0.075)


def test_long_sequences_match_step_by_step_filtering():
    model = mess3_process()
    tokens = np.random.default_rng(2).integers(0, 3, size=10_007)  # not a square: a remainder is left over
    belief = model.stationary_distribution()
    for token in tokens:
        belief = belief_step(model, belief, token)
    np.testing.assert_allclose(belief_after(model, tokens), belief, rtol=1e-12)
    blocked = FiniteHMM.from_state_emitting(np.eye(2), np.eye(2), emitted_by="destination")
    impossible = np.zeros(10_000, dtype=int)
    impossible[6_543] = 1  # state 0 never emits token 1
    with pytest.raises(ValueError, match="token 1 at position 6543 has probability zero"):
        belief_after(blocked, impossible, prior=[1.0, 0.0])
    impossible[6_543] = 7
    with pytest.raises(ValueError, match="token 7 at position 6543 is out of range"):
        belief_after(blocked, impossible, prior=[1.0, 0.0])


def test_belief_after_checks_its_prior_and_tokens():
    model = mess3_process()
    # no tokens: the prior itself (a fresh array, not the caller's), for one sequence or a batch
    prior = np.array([0.2, 0.3, 0.5])
    alone = belief_after(model, [], prior=prior)
    np.testing.assert_array_equal(alone, prior)
    assert alone is not prior
    np.testing.assert_allclose(belief_after(model, np.zeros((2, 0), dtype=int)), [[1 / 3] * 3] * 2, atol=1e-15)
    with pytest.raises(ValueError, match="prior\\[0\\] = -1.0.*nonnegative"):
        belief_after(model, [0, 1], prior=[-1.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="prior: row \\(the vector\\) sums to 0.5"):
        belief_after(model, [[0, 1]], prior=[0.5, 0.0, 0.0])
    with pytest.raises(ValueError, match="dtype float64; expected integer token indices"):
        belief_after(model, np.array([0.0, 1.0]))


# -- sequences: sampling, sequence probabilities, next-token entropies ---------------------------


def _binary_entropy(p):
    return -(p * np.log(p) + (1 - p) * np.log(1 - p))


# A hidden state that never changes, read through a 0.9-reliable token, from a uniform prior.
# By hand: P(0) = 1/2; P(00) = (0.9^2 + 0.1^2) / 2 = 0.41, P(01) = 0.09. After one token 0 the next is
# 0 w.p. 0.82; after 00, w.p. (0.81 * 0.9 + 0.01 * 0.1) / 0.82 = 0.73 / 0.82; after 01, 1/2.
STATIC = FiniteHMM.from_state_emitting(np.eye(2), np.array([[0.9, 0.1], [0.1, 0.9]]), emitted_by="destination")
STATIC_PRIOR = [0.5, 0.5]
STATIC_ENTROPIES = [np.log(2), _binary_entropy(0.82), 0.82 * _binary_entropy(0.73 / 0.82) + 0.18 * np.log(2)]
# Mess3 (shared notes, section 2): the first token is uniform; after token 0 the belief is
# (0.85, 0.075, 0.075), the chain moves it to P(state 0) = 0.85 * 0.9 + 0.15 * 0.05 = 0.7725, and
# the next token repeats w.p. 0.7725 * 0.85 + 0.2275 * 0.075 = 0.6736875 (the others split the rest).
MESS3_REPEAT = 0.6736875


def test_next_token_entropies_match_hand_computed_values():
    np.testing.assert_allclose(
        next_token_entropies(STATIC, max_context_length=2, prior=STATIC_PRIOR), STATIC_ENTROPIES, rtol=1e-12
    )
    # Tokens that name the state (a Markov chain, P = [[0.9, 0.1], [0.5, 0.5]], stationary (5/6, 1/6)):
    # the first token has entropy H(5/6), every later one the entropy rate 5/6 H(0.1) + 1/6 ln 2.
    chain = FiniteHMM.from_state_emitting(np.array([[0.9, 0.1], [0.5, 0.5]]), np.eye(2), emitted_by="destination")
    rate = 5 / 6 * _binary_entropy(0.1) + 1 / 6 * np.log(2)
    np.testing.assert_allclose(
        next_token_entropies(chain, max_context_length=3), [_binary_entropy(5 / 6), rate, rate, rate], rtol=1e-12
    )
    rest = (1 - MESS3_REPEAT) / 2
    mess3 = next_token_entropies(mess3_process(), max_context_length=1)
    np.testing.assert_allclose(
        mess3, [np.log(3), -(MESS3_REPEAT * np.log(MESS3_REPEAT) + 2 * rest * np.log(rest))], rtol=1e-12
    )
    with pytest.raises(ValueError, match="max_context_length must be >= 0"):
        next_token_entropies(STATIC, max_context_length=-1, prior=STATIC_PRIOR)


def test_sequence_probabilities_match_hand_computed_values():
    tokens = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_allclose(
        sequence_probabilities(STATIC, tokens, prior=STATIC_PRIOR), [0.41, 0.09, 0.09, 0.41], rtol=1e-12
    )
    # An impossible sequence has probability 0 without disturbing the others in its batch.
    blocked = FiniteHMM.from_state_emitting(np.eye(2), np.eye(2), emitted_by="destination")
    np.testing.assert_array_equal(
        sequence_probabilities(blocked, np.array([[0, 1, 1], [1, 1, 1]]), prior=[0.5, 0.5]), [0.0, 0.5]
    )
    with pytest.raises(ValueError, match="prior: row \\(the vector\\) sums to 0.5"):
        sequence_probabilities(STATIC, tokens, prior=[0.25, 0.25])


def test_sampled_sequences_follow_the_process():
    draws = 20_000
    pairs = sample_sequences(STATIC, num_sequences=draws, length=2, rng=np.random.default_rng(3), prior=STATIC_PRIOR)
    frequencies = np.bincount(pairs[:, 0] * 2 + pairs[:, 1], minlength=4) / draws
    expected = np.array([0.41, 0.09, 0.09, 0.41])
    # 5 binomial standard deviations: a false alarm about once in 10^6 runs per cell.
    np.testing.assert_array_less(np.abs(frequencies - expected), 5 * np.sqrt(expected * (1 - expected) / draws))
    tokens = sample_sequences(mess3_process(), num_sequences=draws, length=2, rng=np.random.default_rng(4))
    assert tokens.dtype == np.int64 and tokens.shape == (draws, 2)
    repeats = np.mean(tokens[:, 0] == tokens[:, 1])
    assert abs(repeats - MESS3_REPEAT) < 5 * np.sqrt(MESS3_REPEAT * (1 - MESS3_REPEAT) / draws)
    with pytest.raises(ValueError, match="num_sequences >= 1 and length >= 1"):
        sample_sequences(STATIC, num_sequences=0, length=2, rng=np.random.default_rng(0), prior=STATIC_PRIOR)
