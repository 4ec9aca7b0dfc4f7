"""A study member's log (the file its trial sends its output to, named by $RL_HARNESS_MEMBER_LOG) reaches the store
with the member's run, from whichever node ran it: fetched back as artifacts/<run-id>/member.log. Against moto's
S3 server."""

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import run_helpers, s3_server


def test_a_members_log_is_mirrored_with_its_run_and_fetched_back(tmp_path):
    log = tmp_path / "node" / "artifacts" / "studies" / "s1" / "logs" / "m1.log"
    log.parent.mkdir(parents=True)
    log.write_text("the member's output, as its trial writes it\n")
    with s3_server.S3Server() as server:
        environment = {
            **server.store_env(),
            env_vars.MEMBER_LOG_ENV: log,
            "FAKE_RECIPE_ITERATIONS": 3,
        }
        roots = ["--results-dir", tmp_path / "node" / "results", "--artifacts-dir", tmp_path / "node" / "artifacts"]
        status, _, stderr = run_helpers.run_cli(
            [run_helpers.FAKE, "--run-id", "m1", "--upload-artifacts", *roots], **environment
        )
        assert status == 0, stderr[-3000:]
        elsewhere = [
            "--results-dir",
            tmp_path / "driver" / "results",
            "--artifacts-dir",
            tmp_path / "driver" / "artifacts",
        ]
        status, _, stderr = run_helpers.run_cli(["fetch", "m1", *elsewhere], **environment)
    assert status == 0, stderr[-3000:]
    fetched = tmp_path / "driver" / "artifacts" / "m1" / records.MEMBER_LOG_FILE
    assert fetched.read_text() == log.read_text()
    assert not (tmp_path / "node" / "artifacts" / "m1" / records.MEMBER_LOG_FILE).exists()  # the node's log stays put
