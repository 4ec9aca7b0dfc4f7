"""The typed run manifest: manifests written before it (schema 1, committed fixtures) still read, and round-trip."""

import json
import pathlib

import pytest

from rl.harness.run import records
from rl.harness.run.manifest import (MANIFEST_SCHEMA_VERSION, AgentRecord, AgentsInTurnRunner, CheckpointEntry,
                                     DirectRunner, OwnLoopRunner, RunManifest, TuneRunner, read_manifest,
                                     runner_determinism, runner_from_dict, runner_to_dict)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "manifests_v1"  # copies of committed results' manifests


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["direct", "direct_before_determinism", "scheduled", "sequential_runs",
                                  "own_loop_no_runner"])
def test_a_schema_1_manifest_reads_and_keeps_every_field(name, tmp_path):
    original = _fixture(name)
    assert original["schema_version"] == 1
    (tmp_path / records.MANIFEST_FILE).write_text(json.dumps(original))
    manifest = read_manifest(tmp_path)
    written = manifest.to_dict()
    assert written["schema_version"] == MANIFEST_SCHEMA_VERSION == 3 and written["outputs"] == []
    for key, value in original.items():
        if key != "schema_version":
            assert written[key] == value, key
    assert manifest.status == "completed" and manifest.smoke is False
    assert [entry.path for entry in manifest.checkpoints] == [entry["path"] for entry in original["checkpoints"]]


def test_a_schema_2_manifest_reads_with_no_rolling_checkpoint_and_resumes_from_its_last():
    original = json.loads((FIXTURES.parent / "manifests_v2" / "direct.json").read_text())
    assert original["schema_version"] == 2 and "rolling_checkpoints" not in original
    manifest = RunManifest.from_dict(original)
    written = manifest.to_dict()
    assert written["rolling_checkpoints"] == [] and manifest.rolling_checkpoints == ()
    for key, value in original.items():
        if key != "schema_version":
            assert written[key] == value, key
    newest = max(original["checkpoints"], key=lambda entry: entry["iteration"])
    assert manifest.resumable_checkpoint().path == newest["path"]


def test_the_resumable_checkpoint_is_the_newest_of_science_and_rolling_ones():
    def entry(path, iteration, trial_id=None):
        return {"path": path, "iteration": iteration, "env_steps": 100 * iteration, "trial_id": trial_id}

    record = {"schema_version": 3, "status": "crashed", "checkpoints": [entry("checkpoints/iter_000256", 256)],
              "rolling_checkpoints": [entry("checkpoints/rolling_iter_000480", 480),
                                      entry("checkpoints/a/rolling_iter_000490", 490, "a")]}
    assert RunManifest.from_dict(record).resumable_checkpoint().path == "checkpoints/rolling_iter_000480"
    record["checkpoints"].append(entry("checkpoints/iter_000512", 512))
    assert RunManifest.from_dict(record).resumable_checkpoint().path == "checkpoints/iter_000512"
    assert RunManifest.from_dict({"schema_version": 3}).resumable_checkpoint() is None


def test_the_runner_sections_of_schema_1_are_typed():
    direct = RunManifest.from_dict(_fixture("direct")).runner
    assert isinstance(direct, DirectRunner) and direct.algorithm == "PPO" and direct.checkpoint_initial is True
    assert direct.determinism["expected"] is True and runner_determinism(direct) == direct.determinism
    older = RunManifest.from_dict(_fixture("direct_before_determinism")).runner
    assert isinstance(older, DirectRunner) and older.determinism is None
    assert runner_determinism(older)["expected"] is False  # nothing recorded: compared statistically
    scheduled = RunManifest.from_dict(_fixture("scheduled")).runner  # a kind this harness no longer writes
    assert isinstance(scheduled, OwnLoopRunner) and scheduled.kind == "scheduled"
    assert scheduled.details["checkpoint_at_step_0"] is not None
    assert RunManifest.from_dict(_fixture("own_loop_no_runner")).runner is None


def test_every_runner_kind_round_trips():
    sampling = {"placement": "local"}
    determinism = {"expected": True, "why": "one process"}
    runners = [
        DirectRunner(algorithm="PPO", rllib_seed=1, sampling=sampling, determinism=determinism, stop={"env_steps": 8},
                     checkpoint_schedule={"kind": "Every", "iterations": 2}, checkpoint_initial=False),
        TuneRunner(algorithm="PPO", trial_seeds=(1, 2), storage="tune", sampling=sampling, determinism=determinism,
                   stop={"env_steps": 8}, checkpoint_every=2),
        AgentsInTurnRunner(stop={"env_steps": 8}, agents={"a": AgentRecord(algorithm="PPO", rllib_seed=3,
                                                                          sampling=sampling, determinism=determinism,
                                                                          env_runner_nodes=("n1",))}),
        OwnLoopRunner(kind="in_process", details={"processes": 2}),
    ]
    for runner in runners:
        document = json.loads(json.dumps(runner_to_dict(runner)))
        assert runner_from_dict(document) == runner
    assert runner_to_dict(runners[2])["kind"] == "agents in turn"
    assert runner_determinism(runners[2]) == determinism


def test_unknown_fields_are_kept_rather_than_dropped():
    document = {**_fixture("direct"), "from_a_newer_writer": {"x": 1}}
    document["runner"] = {**document["runner"], "new_runner_field": 7}
    written = RunManifest.from_dict(document).to_dict()
    assert written["from_a_newer_writer"] == {"x": 1} and written["runner"]["new_runner_field"] == 7


def test_checkpoint_entries_are_typed_and_written_as_before():
    entry = CheckpointEntry.from_dict({"path": "checkpoints/iter_000001", "iteration": 1, "env_steps": 10,
                                       "saved_at": "t"})
    assert entry.trial_id is None and "trial_id" not in entry.to_dict()


@pytest.mark.parametrize("document, problem", [
    ({"schema_version": 4}, "schema_version 4; this harness reads 1, 2, 3"),
    ({"schema_version": 1, "checkpoints": [{"iteration": 1}]}, "is not a run manifest this harness can read"),
    ([1, 2], "schema_version None"),
])
def test_an_unreadable_manifest_names_the_problem(tmp_path, document, problem):
    (tmp_path / records.MANIFEST_FILE).write_text(json.dumps(document))
    with pytest.raises(records.RecordError, match=problem):
        read_manifest(tmp_path)
