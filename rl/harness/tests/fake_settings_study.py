"""A study of the fake recipe with a settings axis (its declared fake/loss_scale), for the study command's tests."""

from rl.harness.study import Score, Study

STUDY = Study(
    agents={"first": "rl.harness.tests.fake_recipe"},
    seeds=(0, 1),
    scores=(Score("last loss", "last_loss"),),
    hyperparameters={"fake/loss_scale": (1.0, 2.0)},
)
