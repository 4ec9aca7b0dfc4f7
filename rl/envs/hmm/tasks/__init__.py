"""Tasks for HMMEnv: each file is one objective (see base.Task for the protocol)."""

from rl.envs.hmm.tasks.base import Task
from rl.envs.hmm.tasks.next_token import NextTokenPrediction
from rl.envs.hmm.tasks.occupancy_control import OccupancyControl
from rl.envs.hmm.tasks.state_guess import StateGuess

__all__ = ["NextTokenPrediction", "OccupancyControl", "StateGuess", "Task"]
