import dataclasses
import datetime
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rl.harness.run import records
from rl.harness.run.manifest import MANIFEST_SCHEMA_VERSION, RunManifest, read_manifest
from rl.harness.run.rows import downsample, flatten_scalars
from rl.harness.run.status import new_run_id, run_id_problem, this_process


def test_run_ids_are_utc_timestamps_with_a_random_suffix_and_sort_by_time():
    early = new_run_id(datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC))
    late = new_run_id(datetime.datetime(2026, 1, 2, 3, 4, 6, tzinfo=datetime.UTC))
    assert early.startswith("20260102T030405Z-") and len(early) == len("20260102T030405Z-") + 6
    assert sorted([late, early]) == [early, late]
    assert run_id_problem(early) is None
    assert len({new_run_id() for _ in range(50)}) == 50


@pytest.mark.parametrize("bad", ["a/b", "..", "x..y", "smoke", "", "-x", "a b", "a\\b"])
def test_bad_run_ids_are_refused_with_a_fix(bad):
    problem = run_id_problem(bad)
    assert problem and ("use" in problem or "choose" in problem)


def test_atomic_write_keeps_the_old_file_when_the_new_one_cannot_be_written(tmp_path):
    path = tmp_path / "record.json"
    records.write_json_atomically(str(path), {"a": 1})
    with pytest.raises(TypeError):
        records.write_json_atomically(str(path), {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["record.json"]  # no temp file left behind


def test_records_are_standard_json(tmp_path):
    path = tmp_path / "record.json"
    records.write_json_atomically(str(path), {"nan": float("nan"), "inf": [float("inf")], "x": 1.5})
    assert json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(name)) == {
        "nan": None,
        "inf": [None],
        "x": 1.5,
    }


def test_json_lines_survive_a_torn_last_line_but_not_a_torn_middle_one(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with records.JsonLinesWriter(str(path)) as writer:
        writer.append({"training_iteration": 1})
        writer.append({"training_iteration": 2})
    with open(path, "a") as handle:
        handle.write('{"training_iteration": 3, "x"')  # killed mid-write
    assert [row["training_iteration"] for row in records.read_json_lines(str(path))] == [1, 2]
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(records.RecordError, match=":2 is not JSON"):
        records.read_json_lines(str(path))


def _running_manifest(age_s, process, stale_after_s=60.0):
    at = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=age_s)
    return RunManifest.from_dict(
        {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "status": "running",
            "heartbeat": {"at": at.isoformat(), "stale_after_s": stale_after_s},
            "process": dataclasses.asdict(process) if dataclasses.is_dataclass(process) else process,
        }
    )


def test_a_live_run_is_running():
    assert _running_manifest(1, this_process()).effective_status == "running"


def test_a_stale_heartbeat_means_crashed_even_on_another_machine():
    elsewhere = {"hostname": "another-host", "pid": 1, "start_ticks": 1}
    assert _running_manifest(1, elsewhere).effective_status == "running"
    manifest = _running_manifest(120, elsewhere)
    assert manifest.effective_status == "crashed"
    assert "heartbeat is 120 s old" in manifest.crash_reason()


def test_a_dead_writer_on_this_machine_means_crashed_at_once():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    writer = dataclasses.replace(this_process(), pid=child.pid)
    manifest = _running_manifest(0, writer)
    assert manifest.effective_status == "crashed"
    assert f"process {child.pid}" in manifest.crash_reason()


def test_a_reused_pid_is_not_mistaken_for_the_writer():
    writer = dataclasses.replace(this_process(), start_ticks=this_process().start_ticks - 1)
    assert _running_manifest(0, writer).effective_status == "crashed"


def test_finished_statuses_are_reported_as_recorded():
    for status in ("completed", "failed", "interrupted"):
        finished = {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "status": status,
            "heartbeat": {"at": "2000-01-01T00:00:00+00:00"},
        }
        assert RunManifest.from_dict(finished).effective_status == status


def test_flatten_keeps_scalars_only():
    flat = flatten_scalars({"a": {"b": np.float32(1.5), "c": [1, 2]}, "d": "x", "e": np.int64(3)})
    assert flat == {"a/b": 1.5, "d": "x", "e": 3}


def test_downsample_keeps_the_ends_and_the_limit():
    points = [[x, x * x] for x in range(1000)]
    sampled = downsample(points, 100)
    assert len(sampled) == 100 and sampled[0] == [0, 0] and sampled[-1] == [999, 999 * 999]
    assert downsample(points[:10], 100) == points[:10]


def test_schema_version_is_checked(tmp_path):
    (tmp_path / records.MANIFEST_FILE).write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(records.RecordError, match="schema_version 99"):
        read_manifest(str(tmp_path))


def test_a_runs_figures_go_with_its_artifacts_and_its_reports_with_its_results(tmp_path):
    from rl.harness.run.layout import RunLayout
    from rl.harness.run.manifest import ExperimentRecord
    from rl.harness.run.seeding import SeedStreams
    from rl.harness.run.session import RunSession

    layout = RunLayout(tmp_path / "results", tmp_path / "artifacts", "20261206T000000Z-figure", False)
    manifest = RunManifest(
        run_id=layout.run_id,
        status=None,
        experiment=ExperimentRecord("x.recipe"),
        seed=0,
        options={"smoke": False},
        paths={},
    )
    run = RunSession(layout=layout, manifest=manifest, seeds=SeedStreams(0))
    run.start()
    assert run.write_output("probe_report.json", {"r2": 0.9}) == layout.results_dir / "probe_report.json"
    assert run.write_output("figures/Simplex.PNG", b"\x89PNG") == layout.artifacts_dir / "figures" / "Simplex.PNG"
    assert run.write_output("kept.svg", "<svg/>", place="results") == layout.results_dir / "kept.svg"  # asked for
    run.finish("completed")
    places = {entry.name: entry.place for entry in read_manifest(str(layout.results_dir)).outputs}
    assert places == {"probe_report.json": "results", "figures/Simplex.PNG": "artifacts", "kept.svg": "results"}


def test_a_recipes_recorder_is_the_run_session_showing_what_recipes_use():
    import inspect
    import typing

    from rl.harness.run.context import Recorder, RunContext
    from rl.harness.run.session import RunSession

    def named(method):
        return [p.name for p in inspect.signature(method).parameters.values() if p.kind is not p.VAR_KEYWORD]

    shown = {name for name in vars(Recorder) if not name.startswith("_")}
    assert shown == {
        "manifest",
        "stop_requested",
        "stop_signal",
        "log_metrics",
        "summarize",
        "checkpoint",
        "record_runner",
    }
    for name in shown:  # each as RunSession offers it: a property stays a property, a method takes its arguments
        ours, theirs = inspect.getattr_static(Recorder, name), inspect.getattr_static(RunSession, name)
        assert isinstance(ours, property) == isinstance(theirs, property), name
        assert isinstance(ours, property) or named(ours) == named(theirs), name
    assert typing.get_type_hints(RunContext.recorder.fget)["return"] is Recorder
