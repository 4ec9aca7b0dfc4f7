"""Slow: a machine lost at 90 % of a run costs at most a tenth of it. The run mirrors to a real S3-compatible server
(moto's) as it trains and is killed with SIGKILL; a fresh clone folder, with nothing of the run, resumes it with
`--resume-from <run-id>` from the newest rolling checkpoint in the store, and the curve joins without a gap."""

import signal

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import run_helpers, s3_server

BUDGET = 40  # iterations; the cadence's tenth is 4 of them
KILLED_AT = 36  # 90 % of the budget
ITERATION_S = 1.5  # a tenth of the budget (6 s) outlasts the rolling saves' cost cap for saves of up to 15 ms


def test_a_run_killed_at_90_percent_resumes_in_a_fresh_folder_from_the_store_redoing_at_most_a_tenth(tmp_path):
    with s3_server.S3Server() as server:
        environment = {
            **server.store_env(),
            env_vars.MIRROR_INTERVAL_ENV: "0.5",
            "FAKE_RECIPE_ITERATIONS": BUDGET,
            "FAKE_RECIPE_SLEEP_S": ITERATION_S,
            "FAKE_RECIPE_ROLLING": "1",
        }
        lost = tmp_path / "lost"
        status, stderr = run_helpers.run_until(
            [run_helpers.FAKE, "--run-id", "lost1", "--upload-artifacts", *run_helpers.store_roots(lost)],
            lambda: len(run_helpers.metrics_rows(lost / "a")) >= KILLED_AT,
            signal.SIGKILL,
            f"iteration {KILLED_AT} of {BUDGET}",
            **environment,
        )
        assert status == -signal.SIGKILL, stderr[-3000:]
        trained = [row["training_iteration"] for row in run_helpers.metrics_rows(lost / "a")]
        assert trained == list(range(1, len(trained) + 1)) and KILLED_AT <= len(trained) < BUDGET

        clone = tmp_path / "clone"  # another machine: a checkout without the run's records or artifacts
        status, _, stderr = run_helpers.resume_fake_from("lost1", clone, **environment)
    assert status == 0, stderr[-3000:]
    assert "run lost1 is not on this machine: fetched its records from the store" in stderr, stderr[-3000:]
    fetched = [line for line in stderr.splitlines() if "is not on this machine: fetched it from the store" in line]
    assert len(fetched) == 1 and "checkpoint checkpoints/rolling_iter_" in fetched[0], stderr[-3000:]

    resumed = run_helpers.manifest(clone / "r" / "resumed")
    assert resumed["status"] == "completed" and resumed["parent_run"]["parent_run_id"] == "lost1"
    own = [
        row["training_iteration"]
        for row in records.read_json_lines(str(clone / "a" / "resumed" / records.METRICS_FILE))
    ]
    restarted_at = own[0] - 1  # the fetched checkpoint's iteration
    assert fetched[0].split("rolling_iter_")[1].startswith(f"{restarted_at:06d} ")
    assert own == list(range(restarted_at + 1, BUDGET + 1))
    redone = len(trained) - restarted_at
    assert 0 <= redone <= BUDGET // 10, (len(trained), restarted_at)
    lineage = [
        row["training_iteration"]
        for row in records.read_json_lines(str(clone / "a" / "resumed" / records.LINEAGE_METRICS_FILE))
    ]
    assert lineage + own == list(range(1, BUDGET + 1))  # the parent's rows up to the checkpoint, then the child's
