"""Slow: each recipe's `--smoke` trains every job in its own process and records the comparison (~1 min each)."""

import json

from experiments.common import smoke
from experiments.ppo_vs_ppg import comparison, ppg_tuning
from rl.harness.run import seeding

SMOKE_SEEDS = 2


def test_the_benchmark_smoke_run_trains_every_pair_and_records_the_comparison(tmp_path):
    run = smoke.run_smoke("experiments/ppo_vs_ppg/ppo_vs_ppg", "experiments.ppo_vs_ppg.ppo_vs_ppg", tmp_path)

    assert run.manifest["status"] == "completed"
    if run.built_with_bazel:
        assert run.manifest["build"]["target"] == "//experiments/ppo_vs_ppg:ppo_vs_ppg"
    report = json.loads((run.results_dir / "comparison.json").read_text())
    assert report["complete"] and report["failed"] == []
    assert len(report["seeds"]) == SMOKE_SEEDS
    runs = report["runs"]
    assert {(r["task"], r["algorithm"]) for r in runs} == {(t, a) for t in comparison.TASKS for a in comparison.ALGORITHMS}
    for task in comparison.TASKS:
        for algorithm in comparison.ALGORITHMS:
            # PPO and PPG see the same seeds.
            assert sorted(r["seed"] for r in runs if (r["task"], r["algorithm"]) == (task, algorithm)) == sorted(report["seeds"])
            assert report["summary"][task][algorithm]["final_return"]["seeds"] == SMOKE_SEEDS
        assert all(r["env_steps"] >= comparison.TASKS[task].env_steps[True] for r in runs if r["task"] == task)
    assert all(r["aux_phases"] >= 1 for r in runs if r["algorithm"] == "PPG")
    assert set(report["references"]["Mess3Control"]) == {"passive", "always tilt to state 0", "uniform random",
                                                         "best memoryless (exact)", "belief-optimal (exact)"}
    for algorithm in comparison.ALGORITHMS:  # the exact references put the Mess3 runs on a 0-1 scale
        assert report["summary"]["Mess3Control"][algorithm]["normalised_final_return"]["seeds"] == SMOKE_SEEDS
    assert "normalised_final_return" not in report["summary"]["CartPole-v1"]["PPO"]
    assert (run.results_dir / "learning_curves.png").stat().st_size > 0
    # One metrics trial per run, each curve complete.
    trials = {}
    for row in run.metrics():
        trials.setdefault(row["trial_id"], []).append(row["num_env_steps_sampled_lifetime"])
    assert sorted(trials) == sorted(f"{r['task']}/{r['label']}/seed{r['seed']}" for r in runs)
    assert all(steps == [point[0] for point in r["curve"]]
               for r in runs for steps in [trials[f"{r['task']}/{r['label']}/seed{r['seed']}"]])
    assert '"summary"' in run.stdout and "results: " in run.stdout


def test_the_mess3_only_smoke_run_trains_both_algorithms_on_mess3(tmp_path):
    run = smoke.run_smoke("experiments/ppo_vs_ppg/ppo_vs_ppg_mess3", "experiments.ppo_vs_ppg.ppo_vs_ppg_mess3",
                          tmp_path)
    assert run.manifest["status"] == "completed"
    report = json.loads((run.results_dir / "comparison.json").read_text())
    assert sorted(report["summary"]) == ["Mess3Control"] and report["complete"]
    assert sorted(report["summary"]["Mess3Control"]) == sorted(comparison.ALGORITHMS)


def test_the_tuning_smoke_run_records_each_variant_with_its_settings(tmp_path):
    run = smoke.run_smoke("experiments/ppo_vs_ppg/ppg_tuning", "experiments.ppo_vs_ppg.ppg_tuning", tmp_path)

    assert run.manifest["status"] == "completed"
    report = json.loads((run.results_dir / "comparison.json").read_text())
    labels = ["PPO"] + [f"PPG, {label}" for label in ppg_tuning.VARIANTS]
    assert sorted(report["summary"][ppg_tuning.TASK]) == sorted(labels)
    settings = report["settings"][ppg_tuning.TASK]
    for label, overrides in ppg_tuning.VARIANTS.items():
        assert all(settings[f"PPG, {label}"][key] == value for key, value in overrides.items()), label
    # The tuning seeds are not the benchmark's (another stream of the same root seed).
    benchmark_seeds = seeding.SeedStreams(run.manifest["seed"]).integers("runs", len(report["seeds"]))
    assert not set(report["seeds"]) & set(benchmark_seeds)
    assert (run.results_dir / "learning_curves.png").stat().st_size > 0
