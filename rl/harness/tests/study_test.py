"""The study's parts without Ray: declaration, statistics, record, refusals and summary over real fake-recipe runs."""

import dataclasses
import datetime
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rl.harness.commands import cli
from rl.harness.commands.study import StudyCommand, load_study
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import records
from rl.harness.study import Score, Study, plan, statistics, summary
from rl.harness.study.record import MemberRecord, StudyRecord
from rl.harness.tests import run_helpers

FAKE = run_helpers.FAKE
STUDY = "rl.harness.tests.fake_study"

# -- declaration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"agents": {}}, "at least one agent"),
        ({"agents": {"bad name": FAKE}}, "agent name"),
        ({"seeds": (0, 0)}, "repeat a seed"),
        ({"seeds": (-1,)}, "non-negative"),
        ({"pairs": (("a", "missing"),)}, "must name two different agents"),
        ({"scores": (Score("x", "a"), Score("x", "b"))}, "score names repeat"),
        ({"statistic": "mode"}, "statistic 'mode' must be one of mean, median, iqm"),
    ],
)
def test_a_malformed_study_is_refused_naming_the_problem(changes, message):
    declared = {"agents": {"a": FAKE, "b": FAKE}, "seeds": (0, 1), **changes}
    with pytest.raises(ValueError, match=message):
        Study(**declared)


def test_a_score_reads_a_dotted_path_and_nothing_else():
    outcome = {"scores": {"greedy": {"value": 0.25}}, "flag": True, "missing": float("nan")}
    assert Score("v", "scores.greedy.value").read(outcome) == 0.25
    assert Score("v", "scores.sampled.value").read(outcome) is None
    assert Score("v", "flag").read(outcome) is None  # a bool is not a score
    assert Score("v", "missing").read(outcome) is None


def test_the_grid_is_agents_by_seeds_and_survives_its_description():
    study = Study(agents={"a": FAKE, "b": FAKE}, seeds=(3, 5), scores=(Score("s", "x"),), pairs=(("a", "b"),))
    # seed-major: a study stopped early has both agents at the same seeds
    assert [member.name for member in study.members()] == ["a/seed 3", "b/seed 3", "a/seed 5", "b/seed 5"]
    assert Study.from_description(json.loads(json.dumps(study.describe()))) == study


# -- statistics: reference values (Student t, 95 %) ----------------------------------------------


def test_the_t_interval_over_three_seeds_matches_the_table_value():
    found = statistics.mean_interval([1.0, 2.0, 3.0], spread="t")
    # sd 1, stderr 1/sqrt(3); t(0.975, df 2) = 4.302653 (any t table)
    assert found["mean"] == 2.0
    assert found["high"] - found["mean"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)


def test_a_paired_difference_uses_only_the_shared_seeds():
    found = statistics.paired_difference({0: 1.0, 1: 3.0, 2: 9.0}, {0: 0.5, 1: 2.0, 7: 0.0})
    assert found["seeds"] == [0, 1]
    assert found["values"] == {"0": 0.5, "1": 1.0}
    assert found["mean"] == 0.75
    # sd of (0.5, 1.0) = 0.35355, stderr 0.25; t(0.975, df 1) = 12.7062
    assert found["low"] == pytest.approx(0.75 - 12.7062 * 0.25, rel=1e-4)
    with pytest.raises(ValueError, match="no seed in common"):
        statistics.paired_difference({0: 1.0}, {1: 1.0})


# -- statistics: bootstrap intervals, IQM and probability of improvement against rliable ------------------
#
# The greedy values of the critic study's seeds 0-9 (README): reward_only, separate_critic, ppg.
REWARD_ONLY = [0.63, -0.69, -0.17, -0.38, 0.79, 0.46, -0.53, 0.63, 0.89, 1.05]
SEPARATE_CRITIC = [0.55, -0.58, -0.91, 0.50, 0.75, 0.73, -0.68, -0.95, -1.07, 0.22]
PPG = [0.71, 0.71, 0.73, -0.35, 0.13, 0.06, 0.47, 0.81, 0.47, 0.41]  # 0.73 ties separate_critic's seed 5


@pytest.mark.parametrize(
    "values, statistic, reference",
    [
        # rliable 1.2.0 (arch 7.2.0) in a scratch venv: rly.get_interval_estimates({k: x[:, None]},
        # lambda s: np.array([metrics.aggregate_iqm(s)]), reps=50000, random_state=np.random.RandomState(0))
        (REWARD_ONLY, "iqm", (0.3267, -0.2400, 0.7583)),
        (SEPARATE_CRITIC, "iqm", (-0.1500, -0.7917, 0.5083)),
        (PPG, "iqm", (0.4833, 0.1883, 0.6767)),
        # the same with metrics.aggregate_mean (rliable's median is one over tasks, of means: not the seeds' median)
        (REWARD_ONLY, "mean", (0.2680, -0.1170, 0.6340)),
        (PPG, "mean", (0.4150, 0.1840, 0.6160)),
    ],
)
def test_bootstrap_intervals_match_rliable(values, statistic, reference):
    found = statistics.bootstrap_interval(values, statistic, resamples=50_000)
    assert found["value"] == pytest.approx(reference[0], abs=5e-4)
    # Two generators (numpy's and arch's) draw other resamples: the percentiles agree to Monte Carlo error.
    assert (found["low"], found["high"]) == pytest.approx(reference[1:], abs=0.015)


def test_the_median_and_the_iqm_are_the_textbook_ones():
    # sorted: -0.69 -0.53 -0.38 -0.17 0.46 0.63 0.63 0.79 0.89 1.05; the IQM cuts floor(10 / 4) = 2 from each end
    assert statistics.bootstrap_interval(REWARD_ONLY, "median")["value"] == pytest.approx((0.46 + 0.63) / 2)
    assert statistics.bootstrap_interval(REWARD_ONLY, "iqm")["value"] == pytest.approx(
        (-0.38 - 0.17 + 0.46 + 0.63 + 0.63 + 0.79) / 6
    )
    assert statistics.bootstrap_interval([0.3], "iqm") == {"value": 0.3, "low": 0.3, "high": 0.3}
    with pytest.raises(ValueError, match="one of mean, median, iqm"):
        statistics.bootstrap_interval(REWARD_ONLY, "mode")


@pytest.mark.parametrize(
    "a, b, reference",
    [
        # rliable 1.2.0: rly.get_interval_estimates({k: [x[:, None], y[:, None]]}, metrics.probability_of_improvement,
        # reps=50000, random_state=np.random.RandomState(0)); its point is scipy's Mann-Whitney U / (10 * 10)
        (PPG, REWARD_ONLY, (0.540, 0.26, 0.80)),
        (SEPARATE_CRITIC, REWARD_ONLY, (0.300, 0.09, 0.56)),
        (PPG, SEPARATE_CRITIC, (0.675, 0.41, 0.90)),  # one tie (0.73), counted half
    ],
)
def test_the_probability_of_improvement_matches_rliable(a, b, reference):
    found = statistics.probability_of_improvement(a, b, resamples=50_000)
    assert found["value"] == pytest.approx(reference[0], abs=5e-4)
    assert (found["low"], found["high"]) == pytest.approx(reference[1:], abs=0.015)
    assert found["n"] == [10, 10]
    assert statistics.probability_of_improvement(a, a)["value"] == 0.5


def test_bootstrap_intervals_cover_the_true_value_about_95_percent_of_the_time():
    # 1000 samples of 40 normal seeds, N(1, 2^2): the mean, the median and the IQM of the distribution are all 1;
    # and 1000 pairs of 30 seeds, N(0.5, 1) against N(0, 1): P(a > b) = Phi(0.5 / sqrt(2)) = 0.6382 (normal table).
    # A percentile interval undercovers a little at these sizes (about 0.94); one 20 % too narrow covers about
    # 0.87, one 20 % too wide about 0.98, so the band 0.92-0.97 (three binomial standard errors) tells them apart.
    generator = np.random.default_rng(0)
    samples = generator.normal(1.0, 2.0, size=(1000, 40))
    for statistic in ("mean", "median", "iqm"):
        found = [statistics.bootstrap_interval(sample, statistic, resamples=1000) for sample in samples]
        coverage = np.mean([interval["low"] <= 1.0 <= interval["high"] for interval in found])
        assert 0.92 <= coverage <= 0.97, (statistic, coverage)
    a, b = generator.normal(0.5, 1.0, size=(1000, 30)), generator.normal(0.0, 1.0, size=(1000, 30))
    found = [statistics.probability_of_improvement(x, y, resamples=1000) for x, y in zip(a, b)]
    coverage = np.mean([interval["low"] <= 0.6382 <= interval["high"] for interval in found])
    assert 0.92 <= coverage <= 0.97, coverage


def test_the_score_distribution_is_the_fraction_of_seeds_above_each_value():
    found = statistics.fraction_above(PPG, [0.0, 0.5, 0.71, 1.0])
    # above 0: all but -0.35; above 0.5: 0.71, 0.71, 0.73, 0.81; above 0.71 (strictly): 0.73, 0.81
    assert list(found["fraction"]) == [0.9, 0.4, 0.2, 0.0]
    assert all(low <= fraction <= high for low, fraction, high in zip(found["low"], found["fraction"], found["high"]))
    assert found["low"][1] < 0.4 < found["high"][1]


# -- the record -------------------------------------------------------------------------------


def test_the_record_round_trips_and_a_damaged_one_names_the_fix(tmp_path):
    study = Study(agents={"a": FAKE}, seeds=(0,))
    record = StudyRecord.new(
        "s1",
        module=STUDY,
        study=study,
        smoke=True,
        code={"library": {"commit": "abc"}},
        build={"lock_sha256": "f00"},
        command_line=["rl-harness", "study", STUDY],
    )
    record = record.with_member(MemberRecord("a", 0, ("s1-a-s0",), "completed"))
    record.write(tmp_path)
    assert StudyRecord.read(tmp_path) == record and record.effective_status == "running"
    (tmp_path / "study.json").write_text('{"schema_version": 1, "members": [{"agent": "a"}]}')
    with pytest.raises(records.RecordError, match="damaged.*start a new study"):
        StudyRecord.read(tmp_path)


def test_a_running_study_whose_command_was_killed_reads_as_crashed(tmp_path):
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import pathlib, time
        from rl.harness.study.declaration import Study
        from rl.harness.study.record import StudyRecord
        StudyRecord.new("s1", module="m", study=Study(agents={{"a": "x"}}, seeds=(0,)), smoke=True, code={{}},
                        build={{}}, command_line=["study"]).write(pathlib.Path({str(tmp_path)!r}))
        print("written", flush=True)
        time.sleep(600)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert writer.stdout.readline().strip() == "written"
        assert StudyRecord.read(tmp_path).effective_status == "running"
    finally:
        writer.kill()
        writer.wait()
    record = StudyRecord.read(tmp_path)
    assert (record.status, record.effective_status) == ("running", "crashed")
    assert record.replace(status="completed").effective_status == "completed"


# -- refusals and the summary over real runs of the fake recipe --------------------------------------


@pytest.fixture
def roots(tmp_path):
    return tmp_path / "results", tmp_path / "artifacts"


def _run(roots, run_id, *args):
    results, artifacts = roots
    return cli.main(
        [
            "rl-harness",
            FAKE,
            "--results-dir",
            str(results),
            "--artifacts-dir",
            str(artifacts),
            "--run-id",
            run_id,
            *args,
        ]
    )


def _adopt(roots, *groups):
    results, artifacts = roots
    return run_helpers.adopt_study(results, artifacts, STUDY, "adopted", *groups)


def _one_error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_runs_of_two_agents_are_summarised_with_intervals_and_pairs(roots, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    for run_id, seed in (("a0", 0), ("a1", 1), ("a2", 2), ("b0", 0), ("b1", 1), ("b2", 2)):
        assert _run(roots, run_id, "--seed", str(seed)) == 0
    metrics_reads = []
    read_json_lines = records.read_json_lines
    monkeypatch.setattr(
        records,
        "read_json_lines",
        lambda path, *args: metrics_reads.append(pathlib.Path(path).name) or read_json_lines(path, *args),
    )
    assert _adopt(roots, "first=a0,a1,a2", "second=b0,b1,b2") == 0
    folder = roots[0] / "studies" / "adopted"
    found = json.loads((folder / summary.SUMMARY_JSON).read_text())
    losses = {
        seed: json.loads((roots[0] / f"a{seed}" / "summary.json").read_text())["outcome"]["last_loss"]
        for seed in range(3)
    }
    first = found["agents"]["first"]["scores"]["last loss"]
    assert first["values"] == {str(seed): loss for seed, loss in losses.items()}
    t_interval = statistics.mean_interval(list(losses.values()), spread="t")
    assert {key: first[key] for key in t_interval} == t_interval
    assert first["bootstrap"]["median"]["value"] == sorted(losses.values())[1]
    # same recipe, same seeds: the same runs, so P(first > second) is all ties, one half
    assert found["pairs"]["first - second"]["last loss"]["probability_of_improvement"]["value"] == 0.5
    assert found["bootstrap"]["seed"] == statistics.BOOTSTRAP_SEED and found["statistic"] == "mean"
    # a study that declares the IQM leads its table with it; the others stand beside it
    iqm = first["bootstrap"]["iqm"]
    text = summary.markdown({**found, "statistic": "iqm"})
    assert text.splitlines()[0].endswith("IQM [95 % bootstrap interval] over seeds.")
    assert f" {iqm['value']:.3f} [{iqm['low']:.3f}, {iqm['high']:.3f}] (n 3) |" in text.splitlines()[4]
    assert "| first - second | 3 | 0.000 [0.000, 0.000] | 0.500 [" in text
    # same recipe, same seeds: the same runs, so every paired difference is exactly 0
    assert found["pairs"]["first - second"]["last loss"]["values"] == {"0": 0.0, "1": 0.0, "2": 0.0}
    assert (folder / summary.CURVES_PNG).read_bytes().startswith(b"\x89PNG")
    assert (folder / summary.DISTRIBUTIONS_PNG).read_bytes().startswith(b"\x89PNG")
    assert "| first | 0." in (folder / summary.SUMMARY_MARKDOWN).read_text()
    assert metrics_reads == [records.METRICS_FILE] * 6  # each run's once, for the summary and the plot
    assert found["budget"] == {"smoke": False, "cap": None}
    assert StudyRecord.read(folder).status == "completed"
    # the bootstrap's seed is fixed: the same runs give the same summary, interval for interval
    record = StudyRecord.read(folder)
    again = summary.summarise(load_study(STUDY), [summary.load_member(roots[0], member) for member in record.members])
    assert json.loads(json.dumps(again)) == found
    _check_hparams_view(roots[1] / "studies" / "adopted" / "tensorboard", found)


def _check_hparams_view(folder, found):
    """TensorBoard's own reader finds the study's experiment, a session per member and its scores."""
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    from tensorboard.plugins.hparams import metadata

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(folder))
    multiplexer.Reload()
    content = multiplexer.PluginRunToTagToContent(metadata.PLUGIN_NAME)
    experiment = metadata.parse_experiment_plugin_data(content["."][metadata.EXPERIMENT_TAG])
    assert [hparam.name for hparam in experiment.hparam_infos] == ["agent", "seed"]
    assert [metric.name.tag for metric in experiment.metric_infos] == ["score/last loss", "score/iterations"]
    sessions = {
        run: metadata.parse_session_start_info_plugin_data(tags[metadata.SESSION_START_INFO_TAG])
        for run, tags in content.items()
        if run != "."
    }
    assert sorted(sessions) == ["first-s0", "first-s1", "first-s2", "second-s0", "second-s1", "second-s2"]
    for run, session in sessions.items():
        agent, seed = run.split("-s")
        assert (session.hparams["agent"].string_value, session.hparams["seed"].number_value) == (agent, int(seed))
        [event] = multiplexer.Tensors(run, "score/last loss")
        recorded = found["agents"][agent]["scores"]["last loss"]["values"][seed]
        assert event.step == 0 and float(event.tensor_proto.float_val[0]) == pytest.approx(recorded, rel=1e-6)


def test_a_resumed_run_is_summarised_with_the_runs_it_continues(roots, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    assert _run(roots, "a0", "--seed", "0") == 0
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    assert _run(roots, "a0-more", "--seed", "0", "--resume-from", "a0") == 0
    assert _run(roots, "a0-last", "--seed", "0", "--resume-from", "a0-more") == 0  # nothing left to train
    assert _run(roots, "a1", "--seed", "1") == 0
    assert _adopt(roots, "first=a0-last,a1") == 0
    folder = roots[0] / "studies" / "adopted"
    [seed_0, seed_1] = StudyRecord.read(folder).members
    assert seed_0.runs == ("a0", "a0-more", "a0-last")
    # each member as its runs' manifests say: the last run's status, the first run's start, the last run's end
    manifests = {
        run_id: json.loads((roots[0] / run_id / records.MANIFEST_FILE).read_text())
        for run_id in ("a0", "a0-last", "a1")
    }
    assert (seed_0.status, seed_0.started_at, seed_0.ended_at) == (
        "completed",
        manifests["a0"]["started_at"],
        manifests["a0-last"]["ended_at"],
    )
    assert (seed_1.status, seed_1.started_at, seed_1.ended_at) == (
        "completed",
        manifests["a1"]["started_at"],
        manifests["a1"]["ended_at"],
    )
    assert None not in (seed_0.started_at, seed_0.ended_at)
    result = summary.load_member(roots[0], seed_0)
    assert [steps for steps, _ in result.curve("fake/loss")] == [100.0, 200.0, 300.0]  # the fake's 100 a row
    # without the first run's folder: one line naming it and the fix
    (roots[0] / "a0" / records.MANIFEST_FILE).rename(roots[0] / "a0" / "moved.json")
    shutil.rmtree(folder)
    capsys.readouterr()
    assert _adopt(roots, "first=a0-last,a1") != 0
    assert re.search(r"run a0 of first/seed 0 is not under .*restore its results folder", _one_error_line(capsys))


def test_a_failed_run_is_named_in_the_summary_not_dropped(roots, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    assert _run(roots, "a0", "--seed", "0") == 0
    monkeypatch.setenv("FAKE_RECIPE_FAIL_AT", "2")
    assert _run(roots, "a1", "--seed", "1") == 1
    assert _adopt(roots, "first=a0,a1") == 1
    found = json.loads((roots[0] / "studies" / "adopted" / summary.SUMMARY_JSON).read_text())
    assert found["completed"] == 1 and found["members"] == 2
    recorded = {member.seed: member for member in StudyRecord.read(roots[0] / "studies" / "adopted").members}
    assert (recorded[0].status, recorded[1].status) == ("completed", "failed")
    assert recorded[1].error == "RuntimeError: fake failure at iteration 2"
    assert found["not_completed"] == [
        {"member": "first/seed 1", "status": "failed", "runs": ["a1"], "error": "fake failure at iteration 2"}
    ]
    assert found["agents"]["first"]["scores"]["last loss"]["n"] == 1
    output = capsys.readouterr()
    assert "first/seed 1: failed (runs a1): fake failure at iteration 2" in output.out
    assert "1 member(s) not completed" in output.err


def test_a_run_without_its_artifacts_is_scored_and_named_as_left_out_of_the_curves(roots, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    for run_id, seed in (("a0", 0), ("a1", 1)):
        assert _run(roots, run_id, "--seed", str(seed)) == 0
    (roots[1] / "a1" / records.METRICS_FILE).unlink()  # as when only results/ was copied to this machine
    assert _adopt(roots, "first=a0,a1") == 0
    folder = roots[0] / "studies" / "adopted"
    found = json.loads((folder / summary.SUMMARY_JSON).read_text())
    assert found["agents"]["first"]["scores"]["last loss"]["n"] == 2
    reason = "its metrics.jsonl is not under its artifacts folder here; restore `artifacts/<run id>/`"
    assert found["without_curve"] == [{"member": "first/seed 1", "run": "a1", "reason": reason}]
    assert "Left out of the learning curves (1 completed runs)" in (folder / summary.SUMMARY_MARKDOWN).read_text()
    assert f"- first/seed 1 (a1): {reason}" in capsys.readouterr().out


def test_one_row_per_seed_is_drawn_as_a_marker_with_its_band_and_no_curve_at_all_is_said(roots, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "1")
    for run_id, seed in (("a0", 0), ("a1", 1), ("b0", 0)):
        assert _run(roots, run_id, "--seed", str(seed)) == 0
    members = [
        MemberRecord(agent, seed, (run_id,))
        for agent, seed, run_id in (("first", 0, "a0"), ("first", 1, "a1"), ("second", 0, "b0"))
    ]
    results = [summary.load_member(roots[0], member) for member in members]
    study = load_study(STUDY)
    axes = summary.curves_figure(study, results).axes[0]
    assert [(line.get_label(), line.get_marker()) for line in axes.lines if not line.get_label().startswith("_")] == [
        ("first (2 seeds)", "o"),
        ("second (1 seed)", "o"),
    ]
    assert len(axes.containers) == 1  # first's 95 % interval over its two seeds, as an error bar
    for member in ("a0", "a1", "b0"):
        (roots[1] / member / records.METRICS_FILE).write_text("")
    results = [summary.load_member(roots[0], member) for member in members]
    axes = summary.curves_figure(study, results).axes[0]
    assert not axes.lines and axes.texts[0].get_text() == "no completed run has a finite fake/loss; see summary.md"


@pytest.mark.parametrize(
    "make_runs, groups, message",
    [
        (
            lambda run: (run("a0", "--seed", "0"), run("a1", "--seed", "1", "--smoke")),
            ("first=a0,a1",),
            r"mix smoke and full budgets: full \(runs a0\); smoke \(runs a1\)",
        ),
        (
            lambda run: (run("a0", "--seed", "0"), run("a1", "--seed", "0")),
            ("first=a0,a1",),
            r"agent first repeats seed 0: runs a0 and a1",
        ),
        (
            lambda run: (run("a0", "--seed", "0"), run("a1", "--seed", "1", "--stop-at-iteration", "2")),
            ("first=a0,a1",),
            r"agent first's runs differ in configuration .*\(runs a0\); .*\(runs a1\)",
        ),
    ],
)
def test_a_set_that_cannot_be_compared_is_refused_in_one_line_naming_the_runs(
    roots, capsys, make_runs, groups, message
):
    make_runs(lambda *args: _run(roots, *args))
    capsys.readouterr()
    assert _adopt(roots, *groups) == EXIT_USAGE
    assert re.search(message, _one_error_line(capsys))
    assert not (roots[0] / "studies").exists()  # refused before anything is written


@pytest.mark.parametrize(
    "field, value, message",
    [
        (("code", "library", "commit"), "0" * 40, r"differ in commit: .*\(runs a0\); .*\(runs a1\)"),
        (("build", "lock_sha256"), "f" * 64, r"differ in lock: .*\(runs a0\); .*\(runs a1\)"),
    ],
)
def test_runs_of_other_code_or_another_lock_are_refused(roots, capsys, field, value, message):
    _run(roots, "a0", "--seed", "0")
    _run(roots, "a1", "--seed", "1")
    path = roots[0] / "a1" / records.MANIFEST_FILE
    document = json.loads(path.read_text())
    place = document
    for key in field[:-1]:
        place = place.setdefault(key, {})
    place[field[-1]] = value
    path.write_text(json.dumps(document))
    capsys.readouterr()
    assert _adopt(roots, "first=a0,a1") == EXIT_USAGE
    assert re.search(message, _one_error_line(capsys))


def test_a_study_module_without_a_study_and_an_unknown_agent_are_one_line_errors(roots, capsys):
    results, artifacts = roots
    assert (
        cli.main(["rl-harness", "study", FAKE, "--results-dir", str(results), "--artifacts-dir", str(artifacts)])
        == EXIT_USAGE
    )
    assert "defines no STUDY" in _one_error_line(capsys)
    assert _adopt(roots, "third=a0") == EXIT_USAGE
    assert "expected AGENT=RUN_ID" in _one_error_line(capsys)


# -- a settings axis ------------------------------------------------------------------------------


def test_a_settings_axis_multiplies_the_grid_and_pairs_each_setting():
    study = Study(
        agents={"a": FAKE, "b": FAKE}, seeds=(0,), pairs=(("a", "b"),), hyperparameters={"fake/loss_scale": (1.0, 2.0)}
    )
    assert [member.name for member in study.members()] == [
        "a[fake/loss_scale=1.0]/seed 0",
        "a[fake/loss_scale=2.0]/seed 0",
        "b[fake/loss_scale=1.0]/seed 0",
        "b[fake/loss_scale=2.0]/seed 0",
    ]
    assert study.variant_pairs() == [
        ("a[fake/loss_scale=1.0]", "b[fake/loss_scale=1.0]"),
        ("a[fake/loss_scale=2.0]", "b[fake/loss_scale=2.0]"),
    ]
    assert Study.from_description(json.loads(json.dumps(study.describe()))) == study


def test_each_setting_is_a_member_run_with_its_set_arguments(roots):
    from rl.harness.commands import study as study_command

    results, artifacts = roots
    _, options = cli.parse(
        [
            "rl-harness",
            "study",
            "rl.harness.tests.fake_settings_study",
            "--results-dir",
            str(results),
            "--artifacts-dir",
            str(artifacts),
            "--study-id",
            "grid",
        ]
    )
    trials = study_command.StudyCommand(options)._plan()
    assert [trial.run_id for trial in trials] == [
        "grid-first-v0-s0",
        "grid-first-v1-s0",
        "grid-first-v0-s1",
        "grid-first-v1-s1",
    ]
    assert trials[1].argv[-2:] == ("--set", "fake/loss_scale=2.0")


def test_a_study_wide_env_step_cap_reaches_every_member_and_is_kept_on_resume(roots, capsys):
    from rl.harness.commands import study as study_command
    from rl.harness.run.manifest import read_manifest

    results, artifacts = roots
    where = ["--results-dir", str(results), "--artifacts-dir", str(artifacts)]
    _, options = cli.parse(["rl-harness", "study", STUDY, *where, "--study-id", "short", "--stop-at-env-steps", "3"])
    command = study_command.StudyCommand(options)
    trials = command._plan()
    assert all(trial.argv[-2:] == ("--stop-at-env-steps", "3") for trial in trials)
    assert cli.main(["rl-harness", *trials[0].on_node({})[0][3:]]) == 0  # the member's run, as the trial starts it
    assert read_manifest(results / trials[0].run_id).budget_cap == {"key": "num_env_steps_sampled_lifetime", "bound": 3}
    found = summary.summarise(command.study, [summary.load_member(results, command.record.members[0])])
    assert "completed (full budget, capped by --stop-at-env-steps 3);" in summary.markdown(found)
    command.record.write(command.folder)
    assert StudyRecord.read(command.folder).stop_at_env_steps == 3
    assert (
        cli.main(["rl-harness", "study", STUDY, *where, "--resume", "short", "--stop-at-env-steps", "5"]) == EXIT_USAGE
    )
    assert "caps its members at 3 env steps" in _one_error_line(capsys)


def test_a_setting_no_agent_declares_is_refused_before_any_record(roots, capsys, monkeypatch):
    from rl.harness.tests import fake_settings_study

    monkeypatch.setattr(
        fake_settings_study, "STUDY", Study(agents={"first": FAKE}, seeds=(0,), hyperparameters={"ppo/lr": (1e-3,)})
    )
    results, artifacts = roots
    assert (
        cli.main(
            [
                "rl-harness",
                "study",
                "rl.harness.tests.fake_settings_study",
                "--results-dir",
                str(results),
                "--artifacts-dir",
                str(artifacts),
            ]
        )
        == EXIT_USAGE
    )
    assert "hyperparameters do not fit agent first" in _one_error_line(capsys)
    assert not results.exists()


def test_runs_with_other_overrides_are_summarised_as_variants(roots, capsys):
    for run_id, seed, scale in (("p0", 0, "1"), ("p1", 1, "1"), ("q0", 0, "2"), ("q1", 1, "2")):
        assert _run(roots, run_id, "--seed", str(seed), "--set", f"fake/loss_scale={scale}") == 0
    assert _adopt(roots, "first=p0,p1,q0,q1") == 0
    found = json.loads((roots[0] / "studies" / "adopted" / summary.SUMMARY_JSON).read_text())
    assert set(found["agents"]) == {"first[fake/loss_scale=1.0]", "first[fake/loss_scale=2.0]"}
    low = found["agents"]["first[fake/loss_scale=1.0]"]["scores"]["last loss"]["values"]
    high = found["agents"]["first[fake/loss_scale=2.0]"]["scores"]["last loss"]["values"]
    assert high == {seed: pytest.approx(2 * value) for seed, value in low.items()}


def test_a_members_new_status_is_one_line_naming_its_run_and_its_log(roots, capsys, monkeypatch):
    _, options = cli.parse(
        [
            "rl-harness",
            "study",
            STUDY,
            "--results-dir",
            str(roots[0]),
            "--artifacts-dir",
            str(roots[1]),
            "--study-id",
            "ev",
        ]
    )
    command = StudyCommand(options)
    first, second = (next(m for m in command.record.members if (m.agent, m.seed) == ("first", seed)) for seed in (0, 1))
    for member, run_id in ((first, "ev-first-s0"), (second, "ev-first-s1")):
        command.record = command.record.with_member(dataclasses.replace(member, runs=(run_id,)))
    assert _run(roots, "ev-first-s0", "--seed", "0") == 0
    monkeypatch.setenv("FAKE_RECIPE_FAIL_AT", "1")
    assert _run(roots, "ev-first-s1", "--seed", "1") == 1
    capsys.readouterr()
    command._refresh({})
    logs = roots[1] / "studies" / "ev" / "logs"
    assert capsys.readouterr().out.splitlines() == [  # both ran between two looks: each has its started line too
        f"study ev: started first/seed 0 (run ev-first-s0); log {logs / 'ev-first-s0.log'}",
        "study ev: finished first/seed 0 (run ev-first-s0)",
        f"study ev: started first/seed 1 (run ev-first-s1); log {logs / 'ev-first-s1.log'}",
        (
            f"study ev: failed first/seed 1 (run ev-first-s1); log {logs / 'ev-first-s1.log'}: RuntimeError: fake failure"
            " at iteration 1"
        ),
    ]


# -- planning seeds --------------------------------------------------------------------------------


def test_the_seeds_for_a_t_interval_of_a_width_come_from_the_t_table():
    # sd 1: 2 t(0.975, n-1) / sqrt(n) <= 1 first at n = 18 (t(17) = 2.110: 0.995); n = 17 gives 1.028 (t(16) = 2.120)
    found = plan.seeds_for_width({0: 1.0, 1: 2.0, 2: 3.0}, width=1.0, statistic="mean")
    assert (found["n"], found["needed"], found["width"]) == (3, 18, pytest.approx(2 * 4.302653 / math.sqrt(3)))
    assert plan.seeds_for_width({0: 1.0}, width=1.0, statistic="mean")["needed"] is None
    # a bootstrap interval narrows as 1 / sqrt(n): n (w / width)^2 seeds
    iqm = statistics.bootstrap_interval(REWARD_ONLY, "iqm")
    found = plan.seeds_for_width(dict(enumerate(REWARD_ONLY)), width=0.2, statistic="iqm")
    assert found["needed"] == math.ceil(10 * ((iqm["high"] - iqm["low"]) / 0.2) ** 2)


def test_study_plan_gives_each_agents_seeds_and_compute_time_from_its_members(roots, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    for run_id, seed in (("a0", 0), ("a1", 1), ("a2", 2), ("b0", 0), ("b1", 1)):
        assert _run(roots, run_id, "--seed", str(seed)) == 0
    assert _adopt(roots, "first=a0,a1,a2", "second=b0,b1") == 0
    capsys.readouterr()
    plan_of = ["rl-harness", "study", "plan", "adopted", "--width", "0.001", "--results-dir", str(roots[0])]
    assert cli.main([*plan_of, "--score", "last loss"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("study adopted: seeds for a 95 % t interval of the mean at most 0.001 wide")
    manifests = {
        run_id: json.loads((roots[0] / run_id / records.MANIFEST_FILE).read_text()) for run_id in ("a0", "a1", "a2")
    }
    losses = [
        json.loads((roots[0] / run_id / "summary.json").read_text())["outcome"]["last_loss"] for run_id in manifests
    ]
    durations = [
        datetime.datetime.fromisoformat(manifest["ended_at"]).timestamp()
        - datetime.datetime.fromisoformat(manifest["started_at"]).timestamp()
        for manifest in manifests.values()
    ]
    needed = plan.seeds_for_width(dict(enumerate(losses)), width=0.001, statistic="mean")["needed"]
    [first] = [line.split(" | ") for line in lines if line.startswith("| first |")]
    assert first[1:2] == ["3"] and first[4:6] == [str(needed), str(needed - 3)]
    member = sum(durations) / 3
    assert first[6] == f"{member / 60:.1f} min" and first[7].rstrip(" |") == f"{(needed - 3) * member / 60:.1f} min"
    assert [line for line in lines if line.endswith(":")] == ["last loss:"]
    assert cli.main([*plan_of, "--statistic", "iqm"]) == 0
    assert "IQM" in capsys.readouterr().out
    assert cli.main([*plan_of, "--score", "nothing"]) == EXIT_USAGE
    assert "has no score 'nothing'; its scores: 'iterations', 'last loss'" in _one_error_line(capsys)
    assert (
        cli.main(["rl-harness", "study", "plan", "missing", "--width", "1", "--results-dir", str(roots[0])])
        == EXIT_USAGE
    )
    assert "no study 'missing'" in _one_error_line(capsys)


# -- more seeds ----------------------------------------------------------------------------------


def test_resume_with_seeds_adds_every_agent_at_each_new_seed_after_the_members_it_has(roots, capsys):
    from rl.harness.commands import study as study_command

    results, artifacts = roots
    where = ["--results-dir", str(results), "--artifacts-dir", str(artifacts)]
    _, options = cli.parse(["rl-harness", "study", STUDY, *where, "--study-id", "grow"])
    command = study_command.StudyCommand(options)
    for trial in command._plan():  # the study's seeds 0 and 1, each member's run as its trial starts it
        assert cli.main(["rl-harness", *trial.on_node({})[0][3:]]) == 0
    command.record.write(command.folder)
    command._refresh({}, final=True)

    _, options = cli.parse(["rl-harness", "study", STUDY, *where, "--resume", "grow", "--seeds", "1-3"])
    command = study_command.StudyCommand(options)
    assert "seeds 2, 3 added (4 member(s)); 4 seeds in all" in capsys.readouterr().out
    assert command.record.grid["seeds"] == [0, 1, 2, 3] and command.study.seeds == (0, 1, 2, 3)
    assert [(member.agent, member.seed, member.status) for member in command.record.members[4:]] == [
        ("first", 2, "pending"),
        ("second", 2, "pending"),
        ("first", 3, "pending"),
        ("second", 3, "pending"),
    ]
    # only the new seeds run, seed by seed; the completed members stay
    assert [trial.run_id for trial in command._plan()] == [
        "grow-first-s2",
        "grow-second-s2",
        "grow-first-s3",
        "grow-second-s3",
    ]
    command.record.write(command.folder)
    assert StudyRecord.read(command.folder).grid["seeds"] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "seeds, message",
    [
        ("3-1", "argument --seeds: expected FIRST-LAST or SEED,SEED,... of distinct non-negative integers"),
        ("1,x", "e.g. 10-42, got '1,x'"),
        ("1,1", "e.g. 10-42, got '1,1'"),
    ],
)
def test_seeds_that_cannot_be_added_are_refused_in_one_line(roots, capsys, seeds, message):
    results, artifacts = roots
    argv = ["rl-harness", "study", STUDY, "--results-dir", str(results), "--artifacts-dir", str(artifacts)]
    with pytest.raises(SystemExit, match=str(EXIT_USAGE)):
        cli.main([*argv, "--resume", "any", "--seeds", seeds])
    assert message in _one_error_line(capsys)
    assert cli.main([*argv, "--seeds", "4-6"]) == EXIT_USAGE  # a new study declares its seeds
    assert "--seeds adds seeds to a study: it goes with --resume <study-id>" in _one_error_line(capsys)
