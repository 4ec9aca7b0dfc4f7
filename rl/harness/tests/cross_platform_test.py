"""The statistical verdict `reproduce` gives across numeric platforms: quantities, yardsticks, verdict (no Ray)."""

import dataclasses
import math
import pathlib

import pytest

from rl.harness.commands import catalog, cli, cross_platform, reproduce
from rl.harness.run import finder, records
from rl.harness.run.manifest import OwnLoopRunnerRecord
from rl.harness.run.rows import RowBudget
from rl.harness.study import declaration
from rl.harness.study import record as study_record
from rl.harness.tests import run_helpers

SUMMARY = {
    "metrics": {
        "fake/loss": {"last": 0.25},
        "timers/sample": {"last": 3.0},
        "env_runners/episode_return_mean": {"last": None, "curve": [[100, 10.0], [200, 12.0]]},
    },
    "outcome": {"scores": {"greedy": {"mean": 0.48, "low": 0.28, "high": 0.68}, "episodes": 400}, "label": "x"},
}


def test_quantities_are_final_metrics_and_scores_with_their_intervals():
    found = cross_platform.quantities(SUMMARY, reproduce.ignored)
    assert found == {
        "metric fake/loss": {"value": 0.25, "interval": None},
        "metric env_runners/episode_return_mean": {"value": 12.0, "interval": None},  # its last finite value
        "score scores.greedy": {"value": 0.48, "interval": [0.28, 0.68]},
        "score scores.episodes": {"value": 400.0, "interval": None},
    }  # the timer is left out, and so is the label


def _quantities(**values):
    return {name: {"value": value, "interval": None} for name, value in values.items()}


def test_the_runs_own_interval_judges_a_score_as_the_belief_study_member_was():
    original = {"score greedy": {"value": 0.481, "interval": [0.281, 0.681]}}
    judged = cross_platform.judge(original, _quantities(**{"score greedy": 0.514}), None, [])
    assert judged["verdict"] == cross_platform.CONSISTENT
    assert judged["quantities"][0]["yardstick"] == "the run's interval [0.281, 0.681]"
    judged = cross_platform.judge(original, _quantities(**{"score greedy": 0.70}), None, [])
    assert judged["verdict"] == cross_platform.DIVERGED and judged["quantities"][0]["within"] is False


def test_a_final_metric_is_judged_by_the_spread_of_its_last_rows():
    rows = [{"training_iteration": i, "loss": value} for i, value in enumerate([5.0, 1.0, 1.2, 0.8, 1.1, 0.9], 1)]
    original = _quantities(**{"metric loss": 0.9})
    tail = [1.0, 1.2, 0.8, 1.1, 0.9]  # the last five rows
    sd = math.sqrt(sum((v - sum(tail) / 5) ** 2 for v in tail) / 4)
    bound = 2.776 * sd * math.sqrt(2)  # t(0.975, 4) = 2.776: one quantity, so no Bonferroni share
    within = cross_platform.judge(original, _quantities(**{"metric loss": 0.9 + 0.98 * bound}), None, rows)
    outside = cross_platform.judge(original, _quantities(**{"metric loss": 0.9 + 1.02 * bound}), None, rows)
    assert within["verdict"] == cross_platform.CONSISTENT and outside["verdict"] == cross_platform.DIVERGED
    assert within["quantities"][0]["yardstick"].startswith("spread of its last 5 rows: +-")


def test_nothing_to_judge_by_and_a_missing_quantity_are_no_consistency():
    judged = cross_platform.judge(_quantities(**{"score n": 3.0}), _quantities(**{"score n": 4.0}), None, [])
    assert judged["quantities"][0]["within"] is None and judged["verdict"] == cross_platform.DIVERGED
    judged = cross_platform.judge({"score s": {"value": 1.0, "interval": [0.0, 2.0]}}, {}, None, [])
    assert (
        judged["quantities"][0]["yardstick"] == "missing in the reproduction"
        and judged["verdict"] == cross_platform.DIVERGED
    )
    assert "nothing to judge" in cross_platform.format_judgement(cross_platform.judge({}, {}, None, []))[-1]


def test_more_quantities_widen_each_bound_so_the_family_keeps_its_five_percent():
    assert cross_platform.judge(_quantities(a=1.0), _quantities(a=1.0), None, [])["confidence_each"] == pytest.approx(
        0.95
    )
    many = {f"metric m{i}": 1.0 for i in range(5)}
    assert cross_platform.judge(_quantities(**many), _quantities(**many), None, [])["confidence_each"] == pytest.approx(
        0.99
    )


# -- a finished study of the same recipe: its seed spread is the yardstick -----------------------------------


def _run(results, artifacts, run_id, seed, *flags):
    assert (
        cli.main(
            [
                "rl-harness",
                run_helpers.FAKE,
                "--run-id",
                run_id,
                "--seed",
                str(seed),
                "--results-dir",
                str(results),
                "--artifacts-dir",
                str(artifacts),
                *flags,
            ]
        )
        == 0
    )
    return finder.find_run(run_id, [str(results)])


def _study(results, study_id, runs_by_seed, status=study_record.COMPLETED, module=run_helpers.FAKE):
    study = declaration.Study(
        agents={"fake": module}, seeds=tuple(runs_by_seed), scores=(declaration.Score("loss", "last_loss"),)
    )
    record = study_record.StudyRecord.new(
        study_id, module="fake_study", study=study, smoke=False, code={}, build={}, command_line=("rl-harness", "study")
    )
    for seed, run_id in runs_by_seed.items():
        record = record.with_member(
            study_record.MemberRecord("fake", seed, runs=(run_id,), status=study_record.COMPLETED)
        )
    record.replace(status=status).write(study_record.study_folder(pathlib.Path(results), study_id, smoke=False))


def test_a_completed_study_of_the_same_recipe_gives_the_seed_spread(tmp_path):
    results, artifacts = tmp_path / "r", tmp_path / "a"
    original = _run(results, artifacts, "20261205T000000Z-orig01", 7)
    members = {seed: _run(results, artifacts, f"20261205T000000Z-seed0{seed}", seed).run_id for seed in (1, 2, 3)}
    assert cross_platform.study_spread(original, reproduce.ignored) is None  # no study yet
    _study(results, "unfinished", members, status=study_record.RUNNING)
    _study(results, "other-recipe", members, module="rl.harness.tests.no_run_recipe")
    assert cross_platform.study_spread(original, reproduce.ignored) is None
    _study(results, "seeds", members)

    spread = cross_platform.study_spread(original, reproduce.ignored)
    assert spread["study"] == "seeds" and spread["members"] == 3
    losses = [
        catalog.final_metrics(finder.find_run(run_id, [str(results)]).summary())["fake/loss"]
        for run_id in members.values()
    ]
    assert spread["values"]["metric fake/loss"] == losses and len(spread["values"]["score last_loss"]) == 3

    mine = cross_platform.quantities(original.summary(), reproduce.ignored)
    judged = cross_platform.judge(mine, mine, spread, [])
    assert judged["study"] == "seeds" and judged["verdict"] == cross_platform.CONSISTENT
    entry = next(entry for entry in judged["quantities"] if entry["quantity"] == "score last_loss")
    assert entry["yardstick"].startswith("seed spread of study seeds (3 runs): +-")


def test_study_members_with_other_overrides_are_no_yardstick(tmp_path):
    results, artifacts = tmp_path / "r", tmp_path / "a"
    original = _run(results, artifacts, "20261205T000000Z-orig02", 7)
    members = {
        seed: _run(results, artifacts, f"20261205T000000Z-scal0{seed}", seed, "--set", "fake/loss_scale=2.0").run_id
        for seed in (1, 2)
    }
    _study(results, "scaled", members)
    assert cross_platform.study_spread(original, reproduce.ignored) is None


def test_quantities_at_a_prefix_row_are_the_summarised_metrics_it_holds():
    row = {"fake/loss": 0.5, "timers/sample": 1.0, "training_iteration": 2}
    assert cross_platform.quantities_at_row(SUMMARY, row, reproduce.ignored) == {
        "metric fake/loss": {"value": 0.5, "interval": None}
    }


def _on_platform(run, **changes):
    """`run` as if recorded on a platform with `changes` (its manifest's record edited in memory)."""
    recorded = dataclasses.replace(run.manifest.platform, **changes)
    return finder.Run(run.run_dir, dataclasses.replace(run.manifest, platform=recorded))


def test_the_outcome_is_compared_by_rows_on_one_platform_and_judged_on_another(tmp_path):
    results, artifacts = tmp_path / "r", tmp_path / "a"
    original = _run(results, artifacts, "20261205T000000Z-orig03", 7)
    one_process = OwnLoopRunnerRecord(
        kind="own loop", details={"determinism": {"expected": True, "why": "one process"}}
    )
    original = finder.Run(original.run_dir, dataclasses.replace(original.manifest, runner=one_process))
    again = _run(results, artifacts, "20261205T000000Z-agai03", 7)
    here = again.manifest.platform.torch_cpu_capability  # whichever CPU runs the test (AMD or Intel)
    elsewhere = _on_platform(again, torch_cpu_capability="AVX2" if here != "AVX2" else "AVX512")
    rows = records.read_json_lines(str(artifacts / original.run_id / records.METRICS_FILE))
    nudged = [dict(row) for row in rows]
    nudged[2]["fake/loss"] = math.nextafter(nudged[2]["fake/loss"], math.inf)
    whole, first_two = RowBudget(), RowBudget.of(2, None)

    same = reproduce.compare_outcome(original, rows, again, nudged, whole)
    assert same["platform_differences"] == [] and same["verdict"] == "diverged" and "judgement" not in same
    assert reproduce.compare_outcome(original, rows, elsewhere, rows, whole)["verdict"] == "identical"
    other = reproduce.compare_outcome(original, rows, elsewhere, nudged, whole)
    assert other["platform_differences"] == ["torch_cpu_capability"] and other["expected"] == "statistical"
    assert other["first_divergence"]["row"] == 3 and other["verdict"] == cross_platform.CONSISTENT
    assert {entry["quantity"] for entry in other["judgement"]["quantities"]} >= {"metric fake/loss", "score last_loss"}
    nudged[1]["fake/loss"] = math.nextafter(nudged[1]["fake/loss"], math.inf)
    prefix = reproduce.compare_outcome(original, first_two.take(rows), elsewhere, first_two.take(nudged), first_two)
    assert [entry["quantity"] for entry in prefix["judgement"]["quantities"]] == [
        "metric fake/loss",
        "metric num_env_steps_sampled_lifetime",
    ]
