"""Finite hidden Markov processes: the model, exact belief filtering and a task-driven Gymnasium env.

from rl.envs.hmm import FiniteHMM, HMMEnv, belief_after, belief_step
from rl.envs.hmm.tasks import NextTokenPrediction, OccupancyControl, StateGuess
"""

from rl.envs.hmm.belief import belief_after, belief_step, next_token_probabilities, start_belief
from rl.envs.hmm.env import OBSERVATION_PARTS, HMMEnv
from rl.envs.hmm.model import FiniteHMM

__all__ = [
    "OBSERVATION_PARTS",
    "FiniteHMM",
    "HMMEnv",
    "belief_after",
    "belief_step",
    "next_token_probabilities",
    "start_belief",
]
