"""Slow: a real run killed with SIGKILL is reported as crashed; what it wrote survives."""

import signal

from rl.harness.run import records
from rl.harness.run.manifest import RunManifest
from rl.harness.tests import run_helpers


def test_sigkill_leaves_a_crashed_run_with_intact_records(tmp_path):
    roots = ["--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"]
    checkpoint = tmp_path / "a" / "killed" / records.CHECKPOINTS_DIR / "iter_000002"
    manifest_file = tmp_path / "r" / "killed" / records.MANIFEST_FILE

    def checkpointed():  # the first checkpoint is in place and recorded
        return manifest_file.exists() and run_helpers.manifest(manifest_file.parent)["checkpoints"]

    run_helpers.run_until(
        [run_helpers.PPO, "--run-id", "killed", *roots],
        checkpointed,
        signal.SIGKILL,
        "the first checkpoint",
        PPO_RECIPE_ITERATIONS=50,
    )
    manifest = run_helpers.manifest(tmp_path / "r" / "killed")
    assert manifest["status"] == "running" and RunManifest.from_dict(manifest).effective_status == "crashed"
    rows = run_helpers.metrics_rows(tmp_path / "a" / "killed")
    assert [row["training_iteration"] for row in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 2
    assert (checkpoint / "rllib_checkpoint.json").exists()
    assert manifest["checkpoints"][0]["path"] == "checkpoints/iter_000002"

    status, listing, _ = run_helpers.run_cli(["runs", *roots[:2]])
    assert status == 0 and listing.splitlines()[1].split()[:2] == ["killed", "crashed"]
    # The next invocation in the same place reports it too.
    status, _, stderr = run_helpers.run_cli([run_helpers.FAKE, "--run-id", "next", *roots], FAKE_RECIPE_ITERATIONS=1)
    assert status == 0 and "run killed crashed" in stderr
