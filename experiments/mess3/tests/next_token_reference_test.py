"""The next-token reference's pure parts: its context adapter and the exact cross-entropy, against hand values."""

import numpy as np
import torch

from experiments.mess3.checks.next_token_reference import TokenContexts, exact_cross_entropies
from rl.envs.hmm import belief_after, next_token_probabilities
from rl.envs.hmm.sequences import next_token_entropies
from rl.envs.mess3 import mess3_process

PROCESS = mess3_process(x=0.05, a=0.85)
# Shared notes, section 2: the belief after one token 0, and the limit of repeated 0s.
AFTER_ONE_ZERO = [0.85, 0.075, 0.075]
ZEROS_FIXED_POINT = [0.98931, 0.00534, 0.00534]
# After token 0, the next token repeats w.p. (0.85 * 0.9 + 0.15 * 0.05) * 0.85 + 0.2275 * 0.075 (by hand).
REPEAT = 0.6736875


def test_token_contexts_are_one_hot_tokens_with_exact_beliefs():
    adapter = TokenContexts(PROCESS)
    contexts = np.array([[0, 2], [1, 1]])
    np.testing.assert_array_equal(adapter.observations(contexts), np.eye(3, dtype=np.float32)[[[0, 2], [1, 1]]])
    np.testing.assert_allclose(adapter.targets(np.array([[0]])), [AFTER_ONE_ZERO], rtol=1e-12)
    np.testing.assert_allclose(adapter.targets(np.zeros((1, 200), dtype=np.int64)), [ZEROS_FIXED_POINT], atol=1e-5)


def test_uniform_guesses_cost_ln3_and_exact_predictions_reach_the_conditional_entropy():
    uniform = exact_cross_entropies(lambda tokens: torch.zeros(len(tokens), 3), PROCESS, max_length=3, batch_size=7)
    np.testing.assert_allclose(uniform, [np.log(3)] * 3, rtol=1e-12)  # the context probabilities sum to 1
    exact = exact_cross_entropies(
        lambda tokens: torch.as_tensor(np.log(next_token_probabilities(PROCESS, belief_after(PROCESS, tokens)))),
        PROCESS,
        max_length=3,
        batch_size=7,
    )
    rest = (1 - REPEAT) / 2
    np.testing.assert_allclose(exact[0], -(REPEAT * np.log(REPEAT) + 2 * rest * np.log(rest)), rtol=1e-12)
    # Longer contexts: the tree recursion of next_token_entropies (hand-checked in rl/envs/tests/hmm_test.py).
    np.testing.assert_allclose(exact, next_token_entropies(PROCESS, max_context_length=3)[1:], rtol=1e-12)
