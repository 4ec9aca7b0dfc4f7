"""Slow: parallel_envs_check's smoke budget trains both groups on the same seeds and records the comparison."""

import json

from experiments.common import smoke
from experiments.mess3.checks import parallel_envs_check


def test_both_groups_train_on_the_same_seeds_with_the_recorded_sampling(tmp_path):
    run = smoke.run_smoke(
        "experiments/mess3/checks/parallel_envs_check", "experiments.mess3.checks.parallel_envs_check", tmp_path
    )

    record = json.loads((run.results_dir / parallel_envs_check.RESULT_FILE).read_text())
    assert sorted(record["groups"]) == ["1 env", "32 envs"]
    for group in record["groups"].values():
        assert len(group["curves"]) == parallel_envs_check.SEEDS
        assert all(row["min"] <= row["mean"] <= row["max"] for row in group["spread"])
    rows = run.metrics()
    # Each run's rows carry its sampling: 2 updates of 1024 steps per seed and group.
    for parallel_envs in (1, 32):
        mine = [row for row in rows if row["parallel_envs"] == parallel_envs]
        assert len(mine) == 2 * parallel_envs_check.SEEDS
        assert {row["num_env_steps_sampled_lifetime"] for row in mine} == {1024, 2048}
    assert (run.artifacts_dir / "learning_curves.png").stat().st_size > 10_000


def test_the_spread_is_taken_at_env_steps_every_curve_reached():
    curves = [[[10, 1.0], [20, 3.0]], [[10, 2.0], [20, 5.0], [30, 9.0]]]
    assert parallel_envs_check.spread_by_env_steps(curves) == [
        {"env_steps": 10, "mean": 1.5, "min": 1.0, "max": 2.0},
        {"env_steps": 20, "mean": 4.0, "min": 3.0, "max": 5.0},
    ]
