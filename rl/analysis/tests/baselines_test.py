"""Random-network baselines: seeded construction, and probes paired with the trained checkpoints'."""

import numpy as np
import torch

from rl.analysis import probing
from rl.analysis.baselines import probe_random_networks, random_network
from rl.analysis.checkpoints import find_checkpoints
from rl.analysis.probes import UNIFORM_CONTEXTS
from rl.analysis.tests import probe_recipe
from rl.analysis.tests.fake_runs import fake_run
from rl.analysis.tests.tiny_modules import SPACES, TRANSFORMER_CONFIG, tiny_transformer
from rl.learners.models import TransformerModel


def _build():
    return TransformerModel(**SPACES, model_config=dict(TRANSFORMER_CONFIG))


def test_random_network_is_seeded_and_leaves_the_callers_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    first = random_network(_build, seed=5)
    assert torch.equal(torch.rand(3), expected_next)
    second, other = random_network(_build, seed=5), random_network(_build, seed=6)
    assert not first.training
    for name, weight in first.state_dict().items():
        assert torch.equal(weight, second.state_dict()[name]), name
    assert any(not torch.equal(w, other.state_dict()[n]) for n, w in first.state_dict().items())


def test_random_networks_meet_the_same_probes_as_the_checkpoints(tmp_path):
    run_id = fake_run(tmp_path / "exp", [tiny_transformer(0)], experiment="rl.analysis.tests.probe_recipe")
    found = find_checkpoints(run_id, roots=[str(tmp_path)])
    plan = probe_recipe.probe_plan(smoke=False)
    seed = np.random.SeedSequence(7)
    trained = probing.probe_checkpoints(found, plan, seed=seed, module_id="default_policy", show_progress=False)
    # A "random" network with the trained checkpoint's weights must give exactly its report (paired),
    # and another network a different one.
    same, different = probe_random_networks(
        found,
        plan,
        [tiny_transformer(0), tiny_transformer(1)],
        folder=tmp_path / "random",
        seed=seed,
        show_progress=False,
    )
    assert (tmp_path / "random" / "random_init_1").is_dir()
    report = trained[0].reports[UNIFORM_CONTEXTS].as_dict()
    assert same.reports[UNIFORM_CONTEXTS].as_dict()["layers"] == report["layers"]
    assert different.reports[UNIFORM_CONTEXTS].as_dict()["split"] == report["split"]
    assert different.reports[UNIFORM_CONTEXTS].as_dict()["layers"] != report["layers"]
