import copy
import datetime

import pytest

from rl.harness.commands import catalog, cli
from rl.harness.run import records
from rl.harness.run.manifest import MANIFEST_SCHEMA_VERSION, RunManifest


def _manifest(run_id, **changes):
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "run_id": run_id,
        "status": "completed",
        "started_at": now,
        "heartbeat": {"at": now, "stale_after_s": 60},
        "process": {"hostname": "elsewhere", "pid": 1},
        "experiment": {"module": "experiments.x.recipe", "source_sha256": "s1"},
        "code": {"experiment_repo": {"commit": "c1", "dirty": False, "diff_sha256": None}},
        "build": {"build_hash": "b1", "lock_sha256": "l1"},
        "versions": {"ray": "2.56.0"},
        "seed": 42,
        "seed_streams": {"rllib": {"value": 5}},
        "options": {"smoke": False, "hardware_profile": "auto", "run_id": None, "results_dir": "/a"},
        "hardware": {"profile": {"name": "cpu", "num_env_runners": 1}},
        "runner": {"kind": "direct"},
        "parent_run": None,
    }
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            manifest[section][field] = value
        else:
            manifest[section] = value
    return manifest


def _store(folder, manifest):
    folder.mkdir(parents=True)
    records.write_json_atomically(str(folder / records.MANIFEST_FILE), manifest)
    return folder


def test_runs_are_found_below_a_workspace_but_not_in_build_or_artifact_trees(tmp_path):
    _store(tmp_path / "experiments/a/results/20260101T000000Z-aaaaaa", _manifest("20260101T000000Z-aaaaaa"))
    _store(tmp_path / "experiments/a/results/smoke/20260101T000001Z-bbbbbb", _manifest("20260101T000001Z-bbbbbb"))
    _store(tmp_path / "bazel-out/x/results/20260101T000002Z-cccccc", _manifest("20260101T000002Z-cccccc"))
    _store(tmp_path / "experiments/a/artifacts/results/20260101T000003Z-dddddd", _manifest("20260101T000003Z-dddddd"))
    runs = catalog.find_runs([str(tmp_path)])
    assert [run.run_id for run in runs] == ["20260101T000000Z-aaaaaa", "20260101T000001Z-bbbbbb"]
    table = catalog.format_runs(runs)
    assert table[0].split()[:3] == ["RUN", "ID", "STATUS"] and "completed" in table[1]


def test_a_results_root_can_be_given_directly(tmp_path):
    _store(tmp_path / "20260101T000000Z-aaaaaa", _manifest("20260101T000000Z-aaaaaa"))
    assert catalog.find_run("20260101T000000Z-aaaaaa", [str(tmp_path)]).run_dir.endswith("aaaaaa")
    with pytest.raises(catalog.RunNotFound, match="rl-harness runs"):
        catalog.find_run("20990101T000000Z-ffffff", [str(tmp_path)])
    with pytest.raises(catalog.RunNotFound, match="'/'"):
        catalog.find_run("../x", [str(tmp_path)])


def test_show_reports_a_crash_and_how_to_resume(tmp_path):
    stale = _manifest("r1", status="running", heartbeat={"at": "2000-01-01T00:00:00+00:00", "stale_after_s": 60})
    run = catalog.Run(str(tmp_path), RunManifest.from_dict(stale))
    lines = catalog.format_show(run)
    assert lines[0] == "run r1: crashed" and "--resume-from r1" in lines[1]
    assert '  build.build_hash: "b1"' not in lines and '  build.build_hash: "b1"' in catalog.format_show(run, full=True)


def test_show_leads_with_results_and_prints_integers_as_integers(tmp_path):
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    records.write_json_atomically(str(run_dir / records.SUMMARY_FILE), {"rows": 512, "metrics": {
        "num_env_steps_sampled_lifetime": {"last": 1048576.0, "curve": [[512, 1048576.0]]},
        "env_runners/episode_return_mean": {"last": None, "curve": [[510, 28.123456789], [511, float("nan")]]},
    }, "outcome": {"scores": {"normalised_value": 0.25, "value": {"mean": 3.4, "low": 3.1, "high": 3.7}}}})
    run = catalog.Run(str(run_dir), RunManifest.from_dict(_manifest("r1")))
    shown = "\n".join(catalog.format_show(run))
    results, provenance = shown.split("provenance:")
    assert "budget: 512 rows; reached num_env_steps_sampled_lifetime 1048576" in results
    assert "1048576.0" not in shown and "episode_return_mean  28.1235" in results  # the last finite value
    assert "scores.normalised_value: 0.25" in results and "scores.value: 3.4 [3.1, 3.7]" in results
    assert "code: experiment" in provenance
    assert catalog.format_runs([run])[1].split()[4] == "1048576"


@pytest.mark.parametrize("change, section", [
    ({"code__experiment_repo": {"commit": "c2", "dirty": False, "diff_sha256": None}}, "code"),
    ({"experiment__source_sha256": "s2"}, "code"),
    ({"build": {"build_hash": "b1", "lock_sha256": "l2"}}, "lock"),
    ({"build": {"build_hash": "b2", "lock_sha256": "l1"}}, "build"),
    ({"seed": 7}, "seed"),
    ({"hardware__profile": {"name": "cuda", "num_env_runners": 1}}, "hardware"),
    ({"options__smoke": True}, "options"),
    ({"parent_run": {"parent_run_id": "r0"}}, "options"),
    ({"versions__ray": "2.57.0"}, "versions"),
])
def test_diff_names_the_section_that_differs(change, section):
    a = catalog.Run("/a", RunManifest.from_dict(_manifest("a")))
    b = catalog.Run("/b", RunManifest.from_dict(_manifest("b", **copy.deepcopy(change))))
    assert {found for found, *_ in catalog.diff(a, b)} == {section}
    assert catalog.format_diff(a, b)[-1].startswith(f"differ: {section} (")


def test_diff_ignores_what_is_specific_to_each_run():
    a = catalog.Run("/a", RunManifest.from_dict(_manifest("a")))
    b = catalog.Run("/b", RunManifest.from_dict(_manifest("b", options__results_dir="/elsewhere", started_at="later",
                                                          process={"hostname": "h", "pid": 2})))
    assert catalog.diff(a, b) == []
    assert catalog.format_diff(a, b)[-1].startswith("no differences in code, lock, build, seed")


def test_runs_under_a_root_of_any_name_are_listed_from_the_workspace_and_by_a_relative_path(tmp_path, monkeypatch,
                                                                                             capsys):
    _store(tmp_path / "myres/smoke/20260101T000000Z-aaaaaa", _manifest("20260101T000000Z-aaaaaa"))
    (tmp_path / "myart/smoke/20260101T000000Z-aaaaaa/checkpoints").mkdir(parents=True)  # no manifest: not a run
    assert [run.run_id for run in catalog.find_runs([str(tmp_path)])] == ["20260101T000000Z-aaaaaa"]
    monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(tmp_path))  # as under `bazel run`, typed in the workspace
    monkeypatch.chdir("/")
    assert cli.main(["rl-harness", "runs", "--results-dir", "myres"]) == 0
    assert str(tmp_path / "myres/smoke/20260101T000000Z-aaaaaa") in capsys.readouterr().out
