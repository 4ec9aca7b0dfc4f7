"""FiniteHMM validation, conversion and exact belief filtering, against the Mess3 facts of the shared notes."""

import numpy as np
import pytest

from rl.envs.hmm import FiniteHMM, belief_after, belief_step, next_token_probabilities
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
