"""Activations from real rl.learners modules: contexts, rollouts, checkpoints and portable export."""

import json
import pathlib
import pickle
import shutil

import numpy as np
import pytest
import torch
from ray.rllib.utils.checkpoints import Checkpointable

from rl.analysis.activations import POLICY_ENCODER, RESIDUAL_STREAM, residual_stream_key, split_layer
from rl.analysis.checkpoints import CheckpointNotFound, find_checkpoints, load_rl_module
from rl.analysis.modules import AnalysisView
from rl.analysis.rollouts import collect_rollouts, context_dataset
from rl.analysis.tests.fake_runs import fake_run
from rl.analysis.tests.mess3_reference import Mess3Contexts, Mess3Env, beliefs_after
from rl.analysis.tests.tiny_modules import tiny_mlp, tiny_transformer
from rl.harness.run import records
from rl.learners.models.base import ACTOR_ENCODER, CRITIC_ENCODER

# The learners test batch/step equality of the residual stream to this tolerance (float32 rounding).
STEP_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def transformer():
    return tiny_transformer(seed=0)


def test_context_dataset_reads_the_last_step_of_each_context(transformer):
    dataset = context_dataset(
        AnalysisView(transformer),
        Mess3Contexts(),
        max_length=4,
        group_prefix_length=2,
        batch_size=7,
        show_progress=False,
    )
    assert dataset.num_samples == 3 + 9 + 27 + 81 and dataset.layers == ["residual_0", "residual_1", "residual_2"]
    context = np.array([[2, 0, 1]])  # row 3 + 9 + (2*9 + 0*3 + 1) in length-then-lexicographic order
    row = 3 + 9 + 19
    with torch.no_grad():
        stream = transformer.residual_stream(torch.eye(3)[context]).activations
    # Equal up to float32 rounding: a batch of 7 and a batch of 1 block the matrix products differently.
    np.testing.assert_allclose(dataset.activations["residual_2"][row], stream[2, 0, -1].numpy(), atol=STEP_TOLERANCE)
    np.testing.assert_allclose(dataset.targets[row], beliefs_after(context)[0])
    assert dataset.distribution.as_dict()["parameters"]["max_length"] == 4


def test_rollouts_record_aligned_steps_reproducibly(transformer):
    def collect(entropy):
        return collect_rollouts(
            transformer,
            Mess3Env(horizon=6),
            num_episodes=7,
            max_steps=8,
            batch_size=3,
            seed=np.random.SeedSequence(entropy),
            policy="untrained",
            show_progress=False,
        )

    rollouts = collect(1)
    np.testing.assert_array_equal(rollouts.lengths, 6)  # truncated by the env before max_steps
    tokens = rollouts.observations.argmax(axis=-1)
    for episode in range(7):
        for step in range(6):
            # The diagnostics reported with an observation are the belief after the tokens so far.
            np.testing.assert_allclose(
                rollouts.diagnostics["belief"][episode, step],
                beliefs_after(tokens[episode : episode + 1, : step + 1])[0],
                atol=1e-12,
            )
    with torch.no_grad():  # step-by-step recording equals running the whole sequences at once
        whole = transformer.residual_stream(torch.as_tensor(rollouts.observations[:, :6])).activations
    for index, name in enumerate(["residual_0", "residual_1", "residual_2"]):
        assert np.abs(rollouts.activations[name][:, :6] - whole[index].numpy()).max() < STEP_TOLERANCE
    assert not rollouts.activations["residual_2"][:, 6:].any()  # padding past the episode
    again, other = collect(1), collect(2)
    np.testing.assert_array_equal(again.actions, rollouts.actions)
    np.testing.assert_array_equal(again.observations, rollouts.observations)
    assert not np.array_equal(other.observations, rollouts.observations)
    dataset = rollouts.probe_dataset("belief")
    assert dataset.num_samples == 42 and sorted(set(dataset.groups)) == list(range(7))
    assert dataset.distribution.parameters["action_sampling"] == "stochastic"
    with pytest.raises(KeyError, match="hidden_state"):
        rollouts.probe_dataset("beliefs")


POLICY_LAYERS = ["residual_0", "residual_1", "residual_2"]
CRITIC_LAYERS = ["critic_encoder/residual_0", "critic_encoder/residual_1", "critic_encoder/residual_2"]


def test_a_separate_critic_encoder_is_probed_under_its_own_name():
    module = tiny_transformer(seed=0, separate_critic=True)
    assert POLICY_ENCODER == ACTOR_ENCODER  # analysis names the policy's encoder as rl.learners does
    assert [split_layer(name) for name in (POLICY_LAYERS[1], CRITIC_LAYERS[1])] == [
        (POLICY_ENCODER, "residual_1"),
        (CRITIC_ENCODER, "residual_1"),
    ]
    dataset = context_dataset(
        AnalysisView(module), Mess3Contexts(), max_length=3, group_prefix_length=1, batch_size=5, show_progress=False
    )
    assert dataset.layers == POLICY_LAYERS + CRITIC_LAYERS
    context = torch.eye(3)[np.array([[1, 2, 0]])]
    row = 3 + 9 + (9 + 6 + 0)
    with torch.no_grad():
        for encoder, names in ((ACTOR_ENCODER, POLICY_LAYERS), (CRITIC_ENCODER, CRITIC_LAYERS)):
            stream = module.residual_stream(context, encoder=encoder).activations
            np.testing.assert_allclose(
                dataset.activations[names[2]][row], stream[2, 0, -1].numpy(), atol=STEP_TOLERANCE
            )
        assert set(AnalysisView(module)(context)) >= {RESIDUAL_STREAM, residual_stream_key(CRITIC_ENCODER)}
    # The two encoders differ (separately initialised): the probe reads what it names.
    assert np.abs(dataset.activations[POLICY_LAYERS[2]] - dataset.activations[CRITIC_LAYERS[2]]).max() > 0.1

    # Rollouts: each encoder steps from its own state; step by step equals the whole episodes at once.
    rollouts = collect_rollouts(
        module,
        Mess3Env(horizon=6),
        num_episodes=4,
        max_steps=6,
        batch_size=2,
        seed=np.random.SeedSequence(0),
        policy="untrained",
        show_progress=False,
    )
    assert list(rollouts.activations) == POLICY_LAYERS + CRITIC_LAYERS
    obs = torch.as_tensor(rollouts.observations)
    with torch.no_grad():
        for encoder, names in ((ACTOR_ENCODER, POLICY_LAYERS), (CRITIC_ENCODER, CRITIC_LAYERS)):
            whole = module.residual_stream(obs, encoder=encoder).activations
            for index, name in enumerate(names):
                assert np.abs(rollouts.activations[name] - whole[index].numpy()).max() < STEP_TOLERANCE


def test_modules_without_a_residual_stream_are_refused():
    mlp = tiny_mlp(seed=0)
    with pytest.raises(ValueError, match="TransformerModel"):
        collect_rollouts(
            mlp,
            Mess3Env(horizon=3),
            num_episodes=1,
            max_steps=2,
            batch_size=1,
            seed=np.random.SeedSequence(0),
            policy="x",
            show_progress=False,
        )
    with pytest.raises(ValueError, match="TransformerModel"):
        context_dataset(
            AnalysisView(mlp), Mess3Contexts(), max_length=1, group_prefix_length=1, batch_size=3, show_progress=False
        )


def test_evaluation_rollouts_play_any_module_without_recording_activations():
    """record_activations=False: an MLP plays; the same seeds give the same episodes as with recording on."""
    mlp = tiny_mlp(seed=0)
    played = collect_rollouts(
        mlp,
        Mess3Env(horizon=5),
        num_episodes=4,
        max_steps=5,
        batch_size=2,
        seed=np.random.SeedSequence(3),
        policy="untrained mlp",
        record_activations=False,
        show_progress=False,
    )
    assert played.activations == {} and played.rewards.shape == (4, 5)
    np.testing.assert_array_equal(played.lengths, 5)
    transformer = tiny_transformer(seed=0)
    recorded, evaluated = (
        collect_rollouts(
            transformer,
            Mess3Env(horizon=5),
            num_episodes=4,
            max_steps=5,
            batch_size=2,
            seed=np.random.SeedSequence(3),
            policy="t",
            record_activations=record,
            show_progress=False,
        )
        for record in (True, False)
    )
    np.testing.assert_array_equal(recorded.actions, evaluated.actions)
    np.testing.assert_array_equal(recorded.rewards, evaluated.rewards)


def test_checkpoints_are_found_from_the_run_records_and_loaded(transformer, tmp_path):
    run_id = fake_run(tmp_path / "exp", [transformer], experiment="fake")
    found = find_checkpoints(run_id, roots=[str(tmp_path)])
    assert found.run.run_id == run_id and found.artifacts_dir == tmp_path / "exp" / "artifacts" / run_id
    assert [(c.name, c.iteration, c.env_steps) for c in found.checkpoints] == [("iter_000001", 1, 100)]
    loaded = load_rl_module(found.checkpoints[0].path)
    obs = torch.randn(2, 5, 3)
    with torch.no_grad():
        assert torch.equal(AnalysisView(loaded)(obs)[RESIDUAL_STREAM], AnalysisView(transformer)(obs)[RESIDUAL_STREAM])
    # Artifacts moved elsewhere (e.g. fetched from B2): found under an explicit artifacts root.
    moved = tmp_path / "elsewhere"
    (tmp_path / "exp" / "artifacts").rename(moved)
    with pytest.raises(CheckpointNotFound, match="fetch artifacts/"):
        find_checkpoints(run_id, roots=[str(tmp_path / "exp")])
    found = find_checkpoints(run_id, roots=[str(tmp_path / "exp")], artifacts_root=str(moved))
    assert found.checkpoints[0].path == moved / run_id / "checkpoints" / "iter_000001"
    with pytest.raises(CheckpointNotFound, match="no RLModule 'agent_0'"):
        load_rl_module(found.checkpoints[0].path, module_id="agent_0")


class _Planted:
    """A pickle that runs code when loaded: what a shared checkpoint can hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "ran"))


def _plant_checkpoint(folder, marker):
    """An RLModule checkpoint folder whose class-and-arguments pickle runs code."""
    module_folder = folder / "learner_group" / "learner" / "rl_module" / "default_policy"
    module_folder.mkdir(parents=True)
    (module_folder / Checkpointable.CLASS_AND_CTOR_ARGS_FILE_NAME).write_bytes(pickle.dumps(_Planted(marker)))
    return folder


@pytest.mark.parametrize("recorded", ["{planted}", "../../../planted"])
def test_a_manifest_leading_to_a_checkpoint_outside_its_run_is_refused_before_loading(transformer, tmp_path, recorded):
    marker = tmp_path / "marker"
    planted = _plant_checkpoint(tmp_path / "exp" / "planted", marker)
    with pytest.raises(Exception):
        load_rl_module(planted)  # the attack is real: loading the planted checkpoint runs its code
    assert marker.read_text() == "ran"
    marker.unlink()
    run_id = fake_run(tmp_path / "exp", [transformer], experiment="fake")
    manifest_file = tmp_path / "exp" / "results" / run_id / records.MANIFEST_FILE
    document = json.loads(manifest_file.read_text())
    document["checkpoints"][0]["path"] = recorded.format(planted=planted)
    manifest_file.write_text(json.dumps(document))
    with pytest.raises(records.RecordError, match="checkpoint .*(not a path relative|leads outside)"):
        find_checkpoints(run_id, roots=[str(tmp_path)])
    assert not marker.exists()


def test_a_manifest_naming_an_artifacts_folder_elsewhere_is_not_followed(transformer, tmp_path):
    """A shared record whose artifacts folder is a planted one: its hostile pickle is never loaded."""
    marker = tmp_path / "marker"
    run_id = fake_run(tmp_path / "exp", [transformer], experiment="fake")
    planted = tmp_path / "exp" / "planted" / run_id
    planted.parent.mkdir()
    (tmp_path / "exp" / "artifacts" / run_id).rename(planted)
    for checkpoint in (planted / "checkpoints").iterdir():
        shutil.rmtree(checkpoint)
        _plant_checkpoint(checkpoint, marker)
    manifest_file = tmp_path / "exp" / "results" / run_id / records.MANIFEST_FILE
    document = json.loads(manifest_file.read_text())
    document["paths"]["artifacts"] = str(planted)
    manifest_file.write_text(json.dumps(document))
    with pytest.raises(CheckpointNotFound, match=f"the checkpoints of run {run_id} are not on this machine"):
        find_checkpoints(run_id, roots=[str(tmp_path / "exp")])
    assert not marker.exists()
