"""Next-token prediction: a passive task rewarding a correct guess of the token about to be emitted.

task = NextTokenPrediction(mess3_process())
env = HMMEnv(task, episode_length=128)   # action k: "the next token is k"; reward 1 when right
"""

from __future__ import annotations

import gymnasium

from rl.envs.hmm.model import FiniteHMM


class NextTokenPrediction:
    """Action k guesses the token emitted by this step; reward 1.0 if it is k, else 0.0.

    The Bayes-optimal policy guesses argmax_k P(k | belief) (see `next_token_probabilities`).
    """

    def __init__(self, model: FiniteHMM):
        self.model = model
        self.action_space = gymnasium.spaces.Discrete(model.num_tokens)
        self.dynamics = (model,) * model.num_tokens

    def reward(self, action, state, token, next_state):
        correct = float(action == token)
        return correct, {"correct": correct}
