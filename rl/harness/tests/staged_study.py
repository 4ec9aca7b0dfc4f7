"""A study of the staged recipe (no RLlib; stages after training): one agent x two seeds, for stopping a study while
a member is in a stage after training (tests/member_trials_test.py). The recipe's STAGED_RECIPE_WAIT_IN reaches every
member's run through the environment."""

from rl.harness.study import Score, Study

STUDY = Study(
    agents={"staged": "rl.harness.tests.staged_recipe"},
    seeds=(0, 1),
    scores=(Score("iterations", "iterations"),),
    curve="training_iteration",
)
