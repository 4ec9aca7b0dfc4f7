"""A study of the fake recipe (no RLlib) for the study command's tests: two agents x two seeds.

Knobs: the fake recipe's (FAKE_RECIPE_ITERATIONS, FAKE_RECIPE_SLEEP_S, FAKE_RECIPE_FAIL_AT) reach
every member's run through the environment; FAKE_RECIPE_FAIL_SEED makes only that seed's runs fail.
"""

from rl.harness.study import Score, Study

STUDY = Study(
    agents={"first": "rl.harness.tests.fake_recipe", "second": "rl.harness.tests.fake_recipe"},
    seeds=(0, 1),
    scores=(Score("last loss", "last_loss"), Score("iterations", "iterations")),
    pairs=(("first", "second"),),
    curve="fake/loss",
)
