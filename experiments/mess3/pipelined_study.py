"""Does pipelined PPO learn as reward_only does? reward_only with `training/pipelined=true`, seeds 0-9.

    ./bazelw run //experiments/mess3:pipelined_study -- --max-concurrent 1     # ~50 min of 2 cores
    ./bazelw run //experiments/mess3:pipelined_check -- --study <study-id>     # against the critic study

Each member is reward_only's ordinary run at its full budget (2^20 env steps) with one update of
policy lag (rl.learners.pipelined). One member at a time: a pipelined run keeps both cores busy.
The reference is the committed critic study's reward_only seeds (`pipelined_check`): the final greedy
value's interval must overlap theirs and each learning curve lie inside their seed band.
"""

from experiments.mess3.task import stages
from rl.harness.study import Study

STUDY = Study(
    agents={"reward_only": "experiments.mess3.reward_only"},
    seeds=tuple(range(10)),
    hyperparameters={"training/pipelined": (True,)},
    scores=stages.CONTROL_SCORES,
)
