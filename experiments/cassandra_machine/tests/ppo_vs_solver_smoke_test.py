"""Slow: `ppo_vs_solver --smoke` trains both agents one iteration, values them and records the
comparison with the reference values of rl/envs/README.md; about 1.5 minutes alone."""

import json

import pytest

from experiments.common import smoke

AGENTS = ["mlp_belief", "transformer_symbol"]


def test_the_smoke_run_compares_both_agents_with_the_solver(tmp_path):
    run = smoke.run_smoke(
        "experiments/cassandra_machine/ppo_vs_solver", "experiments.cassandra_machine.ppo_vs_solver", tmp_path
    )

    assert run.manifest["status"] == "completed"
    if run.built_with_bazel:
        assert run.manifest["build"]["target"] == "//experiments/cassandra_machine:ppo_vs_solver"
    assert sorted(c["trial_id"] for c in run.manifest["checkpoints"]) == AGENTS
    for checkpoint in run.manifest["checkpoints"]:
        assert (run.artifacts_dir / checkpoint["path"]).is_dir()
    assert {row["agent"] for row in run.metrics()} == set(AGENTS)

    comparison = json.loads((run.results_dir / "solver_comparison.json").read_text())
    references = comparison["references"]
    # rl/envs/README.md: point-based solver (seed 0) 595.76, MDP upper bound 661.86.
    assert references["point_based_start_value"] == pytest.approx(595.76, abs=0.01)
    assert references["mdp_upper_bound"] == pytest.approx(661.86, abs=0.01)
    for agent in AGENTS:
        value = comparison["agents"][agent]["discounted_value"]
        # No policy beats the fully observable optimum (3 standard errors of slack for sampling).
        assert value["mean"] <= references["mdp_upper_bound"] + 3 * value["standard_error"]
    assert "results: " in run.stdout
