"""State guess: a passive task rewarding a correct guess of the hidden state the step starts in.

task = StateGuess(mess3_process())
env = HMMEnv(task, episode_length=128)   # action i: "the process is in state i now"
"""

from __future__ import annotations

import gymnasium

from rl.envs.hmm.model import FiniteHMM


class StateGuess:
    """Action i guesses the current hidden state (the one the belief describes); reward 1.0 if right.

    The Bayes-optimal policy guesses argmax_i belief[i].
    """

    def __init__(self, model: FiniteHMM):
        self.model = model
        self.action_space = gymnasium.spaces.Discrete(model.num_states)
        self.dynamics = (model,) * model.num_states

    def reward(self, action, state, token, next_state):
        correct = float(action == state)
        return correct, {"correct": correct}
