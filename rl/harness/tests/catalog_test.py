import copy
import csv
import datetime
import io
import json
import pathlib

import pytest

from rl.harness.commands import catalog, cli
from rl.harness.run import finder, records
from rl.harness.run.manifest import MANIFEST_SCHEMA_VERSION, RunManifest


def _manifest(run_id, **changes):
    now = datetime.datetime.now(datetime.UTC).isoformat()
    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "run_id": run_id,
        "status": "completed",
        "started_at": now,
        "heartbeat": {"at": now, "stale_after_s": 60},
        "process": {"hostname": "elsewhere", "pid": 1},
        "experiment": {"module": "experiments.x.recipe", "source_sha256": "s1"},
        "code": {"experiment_repo": {"commit": "c1c1c1c", "dirty": False, "diff_sha256": None}},
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
    runs = finder.find_runs([str(tmp_path)])
    assert [run.run_id for run in runs] == ["20260101T000000Z-aaaaaa", "20260101T000001Z-bbbbbb"]
    table = catalog.format_runs(runs)
    assert table[0].split()[:3] == ["RUN", "ID", "STATUS"] and "completed" in table[1]


def test_a_results_root_can_be_given_directly(tmp_path):
    _store(tmp_path / "20260101T000000Z-aaaaaa", _manifest("20260101T000000Z-aaaaaa"))
    assert finder.find_run("20260101T000000Z-aaaaaa", [str(tmp_path)]).run_dir.endswith("aaaaaa")
    with pytest.raises(finder.RunNotFound, match="list runs with `python -m rl.harness.commands.cli runs`"):
        finder.find_run("20990101T000000Z-ffffff", [str(tmp_path)])
    with pytest.raises(finder.RunNotFound, match="'/'"):
        finder.find_run("../x", [str(tmp_path)])


def test_show_reports_a_crash_and_how_to_resume(tmp_path):
    stale = _manifest("r1", status="running", heartbeat={"at": "2000-01-01T00:00:00+00:00", "stale_after_s": 60})
    run = finder.Run(str(tmp_path), RunManifest.from_dict(stale))
    lines = catalog.format_show(run)
    assert lines[0] == "run r1: crashed" and lines[1].startswith("  crashed: ")
    assert lines[2] == (
        "  resume: python -m rl.harness.commands.cli experiments.x.recipe --resume-from r1 --seed 42 --results-dir /a"
    )
    assert '  build.build_hash: "b1"' not in lines and '  build.build_hash: "b1"' in catalog.format_show(run, full=True)


@pytest.mark.parametrize("status", ["interrupted", "crashed"])
def test_show_gives_the_bazel_target_that_resumes_an_interrupted_or_crashed_run(tmp_path, status):
    record = _manifest(
        "r1",
        status="running" if status == "crashed" else status,
        heartbeat={"at": "2000-01-01T00:00:00+00:00", "stale_after_s": 60},
        build={"target": "//experiments/x:recipe"},
        options={"smoke": True, "results_dir": None, "artifacts_dir": "/my art"},
    )
    lines = catalog.format_show(finder.Run(str(tmp_path), RunManifest.from_dict(record)))
    assert (
        "  resume: ./bazelw run //experiments/x:recipe -- --resume-from r1 --seed 42 --smoke --artifacts-dir '/my art'"
    ) in lines
    completed = catalog.format_show(finder.Run(str(tmp_path), RunManifest.from_dict(_manifest("r2"))))
    assert not [line for line in completed if "resume:" in line]


def test_a_killed_runs_counters_come_from_its_metrics_not_its_stale_summary(tmp_path):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    record = _manifest(
        "r1",
        status="running",
        heartbeat={"at": "2000-01-01T00:00:00+00:00", "stale_after_s": 60},
        paths={"results": str(results / "r1"), "artifacts": str(artifacts / "r1")},
    )
    _store(results / "r1", record)
    (results / "r1" / "summary.json").write_text(
        json.dumps({"rows": 39, "metrics": {"num_env_steps_sampled_lifetime": {"last": 79872, "curve": [[39, 79872]]}}})
    )
    (artifacts / "r1").mkdir(parents=True)
    rows = [
        {
            "training_iteration": i,
            "num_env_steps_sampled_lifetime": 2048 * i,
            "env_runners/episode_return_mean": -float(i),
        }
        for i in range(1, 49)
    ]
    (artifacts / "r1" / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"tor')
    run = finder.find_run("r1", [str(results)])
    assert run.status == "crashed"
    shown = "\n".join(catalog.format_show(run))
    assert "budget: 48 rows; reached num_env_steps_sampled_lifetime 98304" in shown
    assert "env_runners/episode_return_mean  -48" in shown
    listed = catalog.format_runs([run])[1]
    assert " 48 " in listed and "98304" in listed
    completed = finder.Run(str(results / "r1"), RunManifest.from_dict({**record, "status": "completed"}))
    assert completed.summary()["rows"] == 39  # a completed run's summary is its own final word


def test_show_leads_with_results_and_prints_integers_as_integers(tmp_path):
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    records.write_json_atomically(
        str(run_dir / records.SUMMARY_FILE),
        {
            "rows": 512,
            "metrics": {
                "num_env_steps_sampled_lifetime": {"last": 1048576.0, "curve": [[512, 1048576.0]]},
                "env_runners/episode_return_mean": {"last": None, "curve": [[510, 28.123456789], [511, float("nan")]]},
            },
            "outcome": {"scores": {"normalised_value": 0.25, "value": {"mean": 3.4, "low": 3.1, "high": 3.7}}},
        },
    )
    run = finder.Run(str(run_dir), RunManifest.from_dict(_manifest("r1")))
    shown = "\n".join(catalog.format_show(run))
    results, provenance = shown.split("provenance:")
    assert "budget: 512 rows; reached num_env_steps_sampled_lifetime 1048576" in results
    assert "1048576.0" not in shown and "episode_return_mean  28.1235" in results  # the last finite value
    assert "scores.normalised_value: 0.25" in results and "scores.value: 3.4 [3.1, 3.7]" in results
    assert "code: experiment" in provenance
    assert catalog.format_runs([run])[1].split()[6] == "1048576"


@pytest.mark.parametrize(
    "change, section",
    [
        ({"code__experiment_repo": {"commit": "c2c2c2c", "dirty": False, "diff_sha256": None}}, "code"),
        ({"experiment__source_sha256": "s2"}, "code"),
        ({"build": {"build_hash": "b1", "lock_sha256": "l2"}}, "lock"),
        ({"build": {"build_hash": "b2", "lock_sha256": "l1"}}, "build"),
        ({"seed": 7}, "seed"),
        ({"hardware__profile": {"name": "cuda", "num_env_runners": 1}}, "hardware"),
        ({"options__smoke": True}, "options"),
        ({"parent_run": {"parent_run_id": "r0"}}, "options"),
        ({"versions__ray": "2.57.0"}, "versions"),
    ],
)
def test_diff_names_the_section_that_differs(change, section):
    a = finder.Run("/a", RunManifest.from_dict(_manifest("a")))
    b = finder.Run("/b", RunManifest.from_dict(_manifest("b", **copy.deepcopy(change))))
    assert {found for found, *_ in catalog.diff(a, b)} == {section}
    assert catalog.format_diff(a, b)[-1].startswith(f"differ: {section} (")


def test_diff_ignores_what_is_specific_to_each_run():
    a = finder.Run("/a", RunManifest.from_dict(_manifest("a")))
    b = finder.Run(
        "/b",
        RunManifest.from_dict(
            _manifest("b", options__results_dir="/elsewhere", started_at="later", process={"hostname": "h", "pid": 2})
        ),
    )
    assert catalog.diff(a, b) == []
    assert catalog.format_diff(a, b)[-1].startswith("no differences in code, lock, build, seed")


def test_diff_treats_an_empty_setting_and_a_missing_one_alike():
    a = finder.Run("/a", RunManifest.from_dict(_manifest("a", options__set={})))
    b = finder.Run("/b", RunManifest.from_dict(_manifest("b")))
    assert catalog.diff(a, b) == []
    c = finder.Run("/c", RunManifest.from_dict(_manifest("c", options__set={"ppo/lr": 0.1})))
    assert catalog.diff(a, c) == [("options", "options.set.ppo/lr", None, 0.1)]


def _timed(run_id, started, seconds, module="experiments.x.recipe", status="completed", **changes):
    start = datetime.datetime.fromisoformat(started)
    return finder.Run(
        f"/results/{run_id}",
        RunManifest.from_dict(
            _manifest(
                run_id,
                started_at=start.isoformat(),
                ended_at=(start + datetime.timedelta(seconds=seconds)).isoformat(),
                experiment={"module": module},
                status=status,
                **changes,
            )
        ),
    )


def test_runs_are_listed_by_start_time_with_start_duration_and_final_return(tmp_path):
    named = _timed("named-run", "2026-12-02T08:00:00+00:00", 3725)
    early = _timed("20261203T000000Z-aaaaaa", "2026-12-01T09:30:59+00:00", 42)
    late = _timed("20261201T000000Z-bbbbbb", "2026-12-03T10:00:00+00:00", 75)
    run_dir = tmp_path / "returns"
    run_dir.mkdir()
    records.write_json_atomically(
        str(run_dir / records.SUMMARY_FILE),
        {
            "rows": 3,
            "metrics": {"env_runners/episode_return_mean": {"last": None, "curve": [[1, -88.13], [2, float("nan")]]}},
        },
    )
    late = finder.Run(str(run_dir), late.manifest)
    runs, _damaged = catalog.select_runs([late, named, early])
    assert [run.run_id for run in runs] == ["20261203T000000Z-aaaaaa", "named-run", "20261201T000000Z-bbbbbb"]
    table = [line.split() for line in catalog.format_runs(runs)]
    assert table[0][:10] == [
        "RUN",
        "ID",
        "STATUS",
        "EXPERIMENT",
        "STARTED",
        "DURATION",
        "ROWS",
        "ENV",
        "STEPS",
        "RETURN",
    ]
    assert [row[3:5] for row in table[1:]] == [
        ["2026-12-01T09:30Z", "42s"],
        ["2026-12-02T08:00Z", "1h02m"],
        ["2026-12-03T10:00Z", "1m15s"],
    ]
    assert table[3][5:8] == ["3", "-", "-88.13"]  # the last finite return


def test_runs_filter_by_experiment_status_and_the_last_n_started():
    runs = [
        _timed("r1", "2026-12-01T00:00:00+00:00", 1, module="experiments.mess3.reward_only"),
        _timed("r2", "2026-12-02T00:00:00+00:00", 1, module="experiments.mess3.reward_only", status="failed"),
        _timed("m1", "2026-12-03T00:00:00+00:00", 1, module="experiments.mess3.memoryless_agent"),
        _timed("r3", "2026-12-04T00:00:00+00:00", 1, module="experiments.mess3.reward_only"),
    ]
    torn = finder.DamagedRun("/results/torn", "cannot read")

    def ids(**filters):
        chosen, damaged = catalog.select_runs(runs, [torn], **filters)
        return [run.run_id for run in chosen] + [run.run_id for run in damaged]

    assert ids(recipe="experiments.mess3.reward_only") == ["r1", "r2", "r3", "torn"]
    assert ids(recipe="reward_only") == ids(recipe="mess3.reward_only") == ["r1", "r2", "r3", "torn"]
    assert ids(recipe="only") == ["torn"]  # a name's last parts, not any suffix
    assert ids(status="completed") == ["r1", "m1", "r3"]
    assert ids(status="damaged") == ["torn"]
    assert ids(last=2) == ["m1", "r3", "torn"]
    assert ids(recipe="reward_only", status="completed", last=1) == ["r3"]


def test_runs_under_a_root_of_any_name_are_listed_from_the_workspace_and_by_a_relative_path(
    tmp_path, monkeypatch, capsys
):
    _store(tmp_path / "myres/smoke/20260101T000000Z-aaaaaa", _manifest("20260101T000000Z-aaaaaa"))
    (tmp_path / "myart/smoke/20260101T000000Z-aaaaaa/checkpoints").mkdir(parents=True)  # no manifest: not a run
    assert [run.run_id for run in finder.find_runs([str(tmp_path)])] == ["20260101T000000Z-aaaaaa"]
    monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(tmp_path))  # as under `bazel run`, typed in the workspace
    monkeypatch.chdir("/")
    assert cli.main(["rl-harness", "runs", "--results-dir", "myres"]) == 0
    assert str(tmp_path / "myres/smoke/20260101T000000Z-aaaaaa") in capsys.readouterr().out


def test_runs_as_json_and_csv_give_every_run_with_its_overrides_final_metrics_and_outcome(tmp_path, capsys):
    _store(
        tmp_path / "r1",
        _manifest(
            "r1",
            started_at="2026-12-01T10:00:00+00:00",
            ended_at="2026-12-01T10:02:05+00:00",
            seed=7,
            code={"library": {"commit": "abc123", "dirty": True, "diff_sha256": "d1"}},
            options={"smoke": True, "set": {"ppo/lr": 0.0005, "model/sizes": [64, 64]}},
        ),
    )
    records.write_json_atomically(
        str(tmp_path / "r1" / records.SUMMARY_FILE),
        {
            "rows": 2,
            "metrics": {"env_runners/episode_return_mean": {"last": None, "curve": [[1, 12.5], [2, float("nan")]]}},
            "outcome": {"scores": {"greedy": {"mean": 0.25, "low": 0.1, "high": 0.4}, "label": "x"}},
        },
    )
    _store(
        tmp_path / "r2",
        _manifest("r2", started_at="2026-12-02T10:00:00+00:00", ended_at="2026-12-02T10:00:30+00:00", status="failed"),
    )
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / records.MANIFEST_FILE).write_text("{")
    capsys.readouterr()
    assert cli.main(["rl-harness", "runs", "--results-dir", str(tmp_path), "--json"]) == 0
    rows = json.load(io.StringIO(capsys.readouterr().out))
    assert [row["run_id"] for row in rows] == ["r1", "r2", "torn"]
    first = rows[0]
    assert {
        key: first[key]
        for key in ("experiment", "status", "seed", "smoke", "started_at", "duration_s", "commit", "dirty")
    } == {
        "experiment": "experiments.x.recipe",
        "status": "completed",
        "seed": 7,
        "smoke": True,
        "started_at": "2026-12-01T10:00:00+00:00",
        "duration_s": 125.0,
        "commit": "abc123",
        "dirty": True,
    }
    assert first["overrides"] == {"ppo/lr": 0.0005, "model/sizes": [64, 64]}
    assert first["final_metrics"] == {"env_runners/episode_return_mean": 12.5}  # the last finite value
    assert first["outcome"] == {"scores.greedy.mean": 0.25, "scores.greedy.low": 0.1, "scores.greedy.high": 0.4}
    assert (rows[1]["status"], rows[1]["duration_s"]) == ("failed", 30.0)
    assert rows[2]["status"] == "damaged" and "problem" in rows[2]

    assert cli.main(["rl-harness", "runs", "--results-dir", str(tmp_path), "--csv", "--status", "completed"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["run_id"] for row in table] == ["r1"]
    assert table[0]["duration_s"] == "125.0" and table[0]["dirty"] == "True"
    assert table[0]["overrides.ppo/lr"] == "0.0005" and json.loads(table[0]["overrides.model/sizes"]) == [64, 64]
    assert table[0]["final_metrics.env_runners/episode_return_mean"] == "12.5"
    assert table[0]["outcome.scores.greedy.mean"] == "0.25"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["rl-harness", "runs", "--json", "--csv"])


FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "show_reward_only"


def _recorded_run(tmp_path, change_outcome=lambda outcome: None):
    """A smoke run of reward_only, its own records (fixtures/show_reward_only: its manifest and summary.json as it
    wrote them)."""
    summary = json.loads((FIXTURE / records.SUMMARY_FILE).read_text())
    change_outcome(summary["outcome"])
    records.write_json_atomically(str(tmp_path / records.SUMMARY_FILE), summary)
    manifest = json.loads((FIXTURE / records.MANIFEST_FILE).read_text())
    return finder.Run(str(tmp_path), RunManifest.from_dict(manifest)), summary["outcome"]


def test_show_leads_with_the_scores_and_prints_a_shared_encoders_probes_once_in_one_table(tmp_path):
    run, outcome = _recorded_run(tmp_path)
    lines = catalog.format_show(run)
    assert len(lines) <= 40, "\n".join(lines)
    text = "\n".join(lines)
    assert (
        text.index("scores.normalised_value.greedy: -0.5881 [-1.8559, 0.6797]")
        < text.index("budget:")
        < text.index("final metrics:")
        < text.index("provenance:")
    )
    # one table: a row per layer, a column per distribution, each cell random_mean / step0 / trained
    probes = outcome["probe_r2"]
    start = lines.index("  probe_r2 (random_mean / step0 / trained):")
    header, *rows = (line.split() for line in lines[start + 1 : start + 5])
    assert header == ["process_rollouts", "uniform_contexts"]
    for row in rows:
        layer = row[0]
        cells = [probes[kind][layer] for kind in header]
        assert row[1:] == [
            part
            for cell in cells
            for part in (str(cell["random_mean"]), "/", str(cell["step0"]), "/", str(cell["trained"]))
        ]
    # the shared encoder is read by the policy and the critic: the same numbers, printed once and named
    assert probes["uniform_contexts"]["policy_encoder"] == probes["uniform_contexts"]["critic_encoder"]
    assert text.count(" 0.8748") == 1  # uniform_contexts residual_1 trained: one cell, not three lines
    assert lines[start + 5] == (
        "    the same numbers also under process_rollouts: critic_encoder, policy_encoder;"
        " uniform_contexts: critic_encoder, policy_encoder"
    )
    assert "probe_r2." not in text  # no probe key a line
    # an outcome entry that is a final metric's last value is printed once, among the final metrics
    assert outcome["num_env_steps_sampled_lifetime"] == 3072 and "num_env_steps_sampled_lifetime:" not in text
    assert "    num_env_steps_sampled_lifetime   3072" in lines


def test_show_prints_an_encoder_of_its_own_as_a_column_of_its_own(tmp_path):
    def own_critic(outcome):
        for kind in outcome["probe_r2"].values():
            kind["critic_encoder"]["residual_1"]["trained"] = 0.5

    run, _ = _recorded_run(tmp_path, own_critic)
    lines = catalog.format_show(run)
    start = lines.index("  probe_r2 (random_mean / step0 / trained):")
    assert lines[start + 1].split() == [
        "process_rollouts",
        "process_rollouts.critic_encoder",
        "uniform_contexts",
        "uniform_contexts.critic_encoder",
    ]
    assert lines[start + 3].split()[-1] == "0.5"
    assert lines[start + 5].endswith("under process_rollouts: policy_encoder; uniform_contexts: policy_encoder")
