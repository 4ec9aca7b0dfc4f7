"""The Mess3 studies fit their recipes: agents that run, settings the agents declare, probe scores the outcomes hold."""

import importlib

import pytest

from experiments.mess3 import belief_study, critic_study
from experiments.mess3.checks import ppg_tuning
from experiments.mess3.task import belief_geometry
from rl.analysis.probes import PROCESS_ROLLOUTS, UNIFORM_CONTEXTS

STUDIES = [belief_study.STUDY, critic_study.STUDY, ppg_tuning.STUDY]
LAYERS = ["residual_0", "residual_1", "residual_2"]


@pytest.mark.parametrize("study", STUDIES)
def test_every_agent_is_a_recipe_declaring_the_studys_settings(study):
    for module in study.agents.values():
        recipe = importlib.import_module(module)
        assert callable(recipe.run)
        for setting in study.settings():
            recipe.HYPERPARAMETERS.parse([f"{key}={value}" for key, value in setting])


def _outcome(layers):
    """An outcome as stages.run returns it, its probe R^2s distinct per layer (trained i / 10, random i / 100)."""
    comparison = {
        "distributions": {
            kind: {
                "layers": {
                    name: {"trained_r2": index / 10, "step0_r2": 0.0, "random_r2": [index / 100]}
                    for index, name in enumerate(layers)
                }
            }
            for kind in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS)
        }
    }
    return {"probe_r2": belief_geometry.headline(comparison)}


def _probe_scores(study, outcome):
    return {score.name: score.read(outcome) for score in study.scores if score.path.startswith("probe_r2.")}


def test_the_critic_studys_probe_scores_read_the_encoder_each_role_reads():
    shared = _probe_scores(critic_study.STUDY, _outcome(LAYERS))
    separate = _probe_scores(critic_study.STUDY, _outcome(LAYERS + [f"critic_encoder/{name}" for name in LAYERS]))
    assert len(shared) == 8 and None not in shared.values()
    policy = "R^2 block 1, uniform contexts, policy encoder (trained)"
    critic = "R^2 block 1, uniform contexts, critic encoder (trained)"
    assert shared[policy] == shared[critic] == 0.1  # one shared encoder: both roles read residual_1
    assert (separate[policy], separate[critic]) == (0.1, 0.4)  # the critic's own: critic_encoder/residual_1
    assert separate["R^2 block 1, process rollouts, critic encoder (random)"] == 0.04


def test_the_belief_studys_probe_scores_still_read_the_plain_layer_names():
    scores = _probe_scores(belief_study.STUDY, _outcome(LAYERS))
    assert scores == {
        "R^2 block 1, uniform contexts (trained)": 0.1,
        "R^2 block 1, uniform contexts (random)": 0.01,
        "R^2 block 1, process rollouts (trained)": 0.1,
        "R^2 block 1, process rollouts (random)": 0.01,
    }


def test_ppg_is_tuned_on_other_seeds_than_the_critic_studys():
    assert not set(ppg_tuning.STUDY.seeds) & set(critic_study.STUDY.seeds)
    assert set(ppg_tuning.STUDY.agents.values()) == {critic_study.STUDY.agents["ppg"]}
