"""The typed run manifest: manifests written before it (schemas 1 and 2, committed fixtures) still read, and round-trip."""

import json
import pathlib

import pytest

from rl.harness.run import platform, records
from rl.harness.run.manifest import (
    MANIFEST_SCHEMA_VERSION,
    AgentRecord,
    AgentsInTurnRunnerRecord,
    CheckpointEntry,
    DirectRunnerRecord,
    OwnLoopRunnerRecord,
    RunManifest,
    TuneRunnerRecord,
    read_manifest,
    runner_determinism,
    runner_from_dict,
    runner_to_dict,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "manifests_v1"  # copies of committed results' manifests
FIXTURES_V2 = pathlib.Path(__file__).parent / "fixtures" / "manifests_v2"


def _fixture(name: str, folder: pathlib.Path = FIXTURES) -> dict:
    return json.loads((folder / f"{name}.json").read_text())


@pytest.mark.parametrize(
    "name", ["direct", "direct_before_determinism", "scheduled", "sequential_runs", "own_loop_no_runner"]
)
def test_a_schema_1_manifest_reads_and_keeps_every_field(name, tmp_path):
    original = _fixture(name)
    assert original["schema_version"] == 1
    (tmp_path / records.MANIFEST_FILE).write_text(json.dumps(original))
    manifest = read_manifest(tmp_path)
    written = manifest.to_dict()
    assert written["schema_version"] == MANIFEST_SCHEMA_VERSION == 3 and written["outputs"] == []
    assert manifest.platform is None and written["platform"] is None  # unknown: recorded before schema 3
    for key, value in original.items():
        if key != "schema_version":
            assert written[key] == value, key
    assert manifest.status == "completed" and manifest.smoke is False
    assert [entry.path for entry in manifest.checkpoints] == [entry["path"] for entry in original["checkpoints"]]


def test_the_resumable_checkpoint_is_the_newest_of_science_and_rolling_ones():
    def entry(path, iteration, trial_id=None):
        return {"path": path, "iteration": iteration, "env_steps": 100 * iteration, "trial_id": trial_id}

    record = {
        "schema_version": 3,
        "status": "crashed",
        "checkpoints": [entry("checkpoints/iter_000256", 256)],
        "rolling_checkpoints": [
            entry("checkpoints/rolling_iter_000480", 480),
            entry("checkpoints/a/rolling_iter_000490", 490, "a"),
        ],
    }
    assert RunManifest.from_dict(record).resumable_checkpoint().path == "checkpoints/rolling_iter_000480"
    record["checkpoints"].append(entry("checkpoints/iter_000512", 512))
    assert RunManifest.from_dict(record).resumable_checkpoint().path == "checkpoints/iter_000512"
    assert RunManifest.from_dict({"schema_version": 3}).resumable_checkpoint() is None


def test_a_schema_2_manifest_reads_with_its_platform_unknown_no_rolling_checkpoint_and_every_field(tmp_path):
    original = _fixture("direct", FIXTURES_V2)  # belief-extra-reward_only-s5, written before the platform was recorded
    assert original["schema_version"] == 2 and "platform" not in original
    (tmp_path / records.MANIFEST_FILE).write_text(json.dumps(original))
    manifest = read_manifest(tmp_path)
    assert manifest.platform is None and platform.describe(manifest.platform)[0].startswith("unknown")
    written = manifest.to_dict()
    assert (
        written["schema_version"] == 3 and manifest.rolling_checkpoints == () and written["rolling_checkpoints"] == []
    )
    assert {
        key: value for key, value in written.items() if key not in ("schema_version", "platform", "rolling_checkpoints")
    } == {key: value for key, value in original.items() if key != "schema_version"}
    newest = max(original["checkpoints"], key=lambda entry: entry["iteration"])
    assert manifest.resumable_checkpoint().path == newest["path"]  # resumes from its last science checkpoint


PLATFORM = platform.NumericPlatform(
    cpu=platform.CpuPlatform(
        vendor="GenuineIntel",
        model_name="Xeon",
        family="6",
        model="143",
        isa_level="x86-64-v4",
        extensions=("avx2", "avx512f", "amx_tile"),
    ),
    torch_cpu_capability="AVX512",
    kernel_dispatch={"MKL_CBWR": "AVX2"},
    numpy_simd=("X86_V3", "X86_V4"),
    numpy_simd_baseline=("X86_V2",),
    threads={"torch": 1, "OMP_NUM_THREADS": "1"},
    libraries={"mkl": "2024.2", "onednn": "3.12.0", "openblas_core": "SkylakeX"},
    gpu=platform.GpuPlatform(
        model="H100",
        compute_capability="9.0",
        cuda="12.8",
        cudnn="91002",
        driver="580.65.06",
        determinism={"deterministic_algorithms": False},
    ),
)


def test_the_platform_round_trips_typed():
    document = {**_fixture("direct", FIXTURES_V2), "schema_version": 3, "platform": PLATFORM.to_dict()}
    manifest = RunManifest.from_dict(json.loads(json.dumps(document)))
    assert manifest.platform == PLATFORM and manifest.to_dict()["platform"] == PLATFORM.to_dict()
    assert manifest.platform.gpu.compute_capability == "9.0" and manifest.platform.cpu.extensions[-1] == "amx_tile"


def test_the_runner_sections_of_schema_1_are_typed():
    direct = RunManifest.from_dict(_fixture("direct")).runner
    assert isinstance(direct, DirectRunnerRecord) and direct.algorithm == "PPO" and direct.checkpoint_initial is True
    assert direct.determinism["expected"] is True and runner_determinism(direct) == direct.determinism
    older = RunManifest.from_dict(_fixture("direct_before_determinism")).runner
    assert isinstance(older, DirectRunnerRecord) and older.determinism is None
    assert runner_determinism(older)["expected"] is False  # nothing recorded: compared statistically
    scheduled = RunManifest.from_dict(_fixture("scheduled")).runner  # a kind this harness no longer writes
    assert isinstance(scheduled, OwnLoopRunnerRecord) and scheduled.kind == "scheduled"
    assert scheduled.details["checkpoint_at_step_0"] is not None
    assert RunManifest.from_dict(_fixture("own_loop_no_runner")).runner is None


def test_every_runner_kind_round_trips():
    sampling = {"placement": "local"}
    determinism = {"expected": True, "why": "one process"}
    runners = [
        DirectRunnerRecord(
            algorithm="PPO",
            rllib_seed=1,
            sampling=sampling,
            determinism=determinism,
            stop={"env_steps": 8},
            checkpoint_schedule={"kind": "Every", "iterations": 2},
            checkpoint_initial=False,
        ),
        TuneRunnerRecord(
            algorithm="PPO",
            trial_seeds=(1, 2),
            storage="tune",
            sampling=sampling,
            determinism=determinism,
            stop={"env_steps": 8},
            checkpoint_every=2,
        ),
        AgentsInTurnRunnerRecord(
            stop={"env_steps": 8},
            agents={
                "a": AgentRecord(
                    algorithm="PPO", rllib_seed=3, sampling=sampling, determinism=determinism, env_runner_nodes=("n1",)
                )
            },
        ),
        OwnLoopRunnerRecord(kind="in_process", details={"processes": 2}),
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
    entry = CheckpointEntry.from_dict(
        {"path": "checkpoints/iter_000001", "iteration": 1, "env_steps": 10, "saved_at": "t"}
    )
    assert entry.trial_id is None and "trial_id" not in entry.to_dict()


@pytest.mark.parametrize(
    "document, problem",
    [
        ({"schema_version": 4}, "schema_version 4; this harness reads 1, 2, 3"),
        ({"schema_version": 1, "checkpoints": [{"iteration": 1}]}, "is not a run manifest this harness can read"),
        ([1, 2], "schema_version None"),
    ],
)
def test_an_unreadable_manifest_names_the_problem(tmp_path, document, problem):
    (tmp_path / records.MANIFEST_FILE).write_text(json.dumps(document))
    with pytest.raises(records.RecordError, match=problem):
        read_manifest(tmp_path)
