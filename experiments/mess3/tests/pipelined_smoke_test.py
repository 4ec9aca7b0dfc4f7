"""Slow: reward_only's `--smoke` with `--set training/pipelined=true` trains through PipelinedPPO (a remote
EnvRunner samples the next batch while the Learner updates) and records it; about 1 minute."""

from experiments.common import smoke


def test_the_pipelined_smoke_run_trains_with_a_policy_lag_of_one_and_records_it(tmp_path):
    run = smoke.run_smoke(
        "experiments/mess3/reward_only",
        "experiments.mess3.reward_only",
        tmp_path,
        options=("--set", "training/pipelined=true"),
    )

    assert run.manifest["status"] == "completed"
    assert run.manifest["options"]["set"] == {"training/pipelined": True}
    assert run.manifest["runner"]["algorithm"] == "PipelinedPPO"
    sampling = run.manifest["runner"]["sampling"]
    assert (sampling["pipelined"], sampling["placement"], sampling["num_env_runners"]) == (True, "remote", 1)
    determinism = run.manifest["runner"]["determinism"]  # one request in flight: the same run on the same platform
    assert determinism["expected"] is True and "policy lag 1" in determinism["why"]
    rows = run.metrics()
    assert [row["pipelined/policy_lag"] for row in rows] == [0, 1, 1]  # the first batch: the Learner's own weights
    assert rows[-1]["num_env_steps_sampled_lifetime"] == 3 * 1024
    assert [c["iteration"] for c in run.manifest["checkpoints"]] == [0, 1, 2, 3]
    assert {"scores", "probe_r2"} <= set(run.summary["outcome"])  # scored and probed as a sequential run is
