"""What `reproduce` takes from a shared run: its metrics fetched from a real S3-compatible server (moto's, started
here) when this machine lacks them, verified, in one line; nothing when neither here nor the store has them."""

import shutil

import pytest

from rl.harness import env_vars
from rl.harness.commands import cli, reproduce_inputs
from rl.harness.remote.store import CredentialsError
from rl.harness.run import finder, records
from rl.harness.run.layout import RunLayout
from rl.harness.tests import run_helpers, s3_server


@pytest.fixture(scope="module")
def server():
    with s3_server.S3Server() as running:
        yield running


def _store(monkeypatch, server):
    key_id, secret = server.read_write
    monkeypatch.setenv(env_vars.STORE_ENV, f"s3://{server.bucket}/shared")
    monkeypatch.setenv(env_vars.STORE_ENDPOINT_ENV, server.endpoint)
    monkeypatch.setenv(env_vars.S3_KEY_ID_ENV, key_id)
    monkeypatch.setenv(env_vars.S3_KEY_ENV, secret)


def _layout(results_root, run_id):
    run = finder.find_run(run_id, [str(results_root)])
    return RunLayout.of_run(run.run_dir, run.manifest)


def test_metrics_that_are_not_here_are_fetched_from_the_store_verified_in_one_line(
    server, tmp_path, monkeypatch, capsys
):
    _store(monkeypatch, server)
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    results, artifacts = tmp_path / "lab" / "results", tmp_path / "lab" / "artifacts"
    assert (
        cli.main(
            [
                "rl-harness",
                run_helpers.FAKE,
                "--run-id",
                "shared1",
                "--results-dir",
                str(results),
                "--artifacts-dir",
                str(artifacts),
                "--upload-artifacts",
            ]
        )
        == 0
    )
    written = (artifacts / "shared1" / records.METRICS_FILE).read_bytes()
    shutil.rmtree(artifacts)  # what a clone holds of a shared run: its committed records only
    capsys.readouterr()

    layout = _layout(results, "shared1")
    assert (
        reproduce_inputs.bring_metrics("shared1", layout)
        == f"its {records.METRICS_FILE} from s3://{server.bucket}/shared"
    )
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1 and printed.startswith(
        f"metrics of run shared1 are not on this machine: fetched from s3://{server.bucket}/shared into "
    ), printed
    assert (layout.artifacts_dir / records.METRICS_FILE).read_bytes() == written
    assert written.count(b"\n") == 3
    assert reproduce_inputs.bring_metrics("shared1", layout) == reproduce_inputs.LOCAL_EVIDENCE  # now here

    assert reproduce_inputs.bring_metrics("absent", layout.with_run_id("absent")) is None  # the store lacks it
    monkeypatch.delenv(env_vars.STORE_ENV)
    monkeypatch.setenv(env_vars.STORE_FILE_ENV, str(tmp_path / "no-store.json"))
    with pytest.raises(CredentialsError, match="no-store.json"):  # a store file named but missing: its fix, not a guess
        reproduce_inputs.bring_metrics("shared2", layout.with_run_id("shared2"))
    monkeypatch.delenv(env_vars.STORE_FILE_ENV)  # no store anywhere ($HOME is a fresh folder: conftest)
    assert reproduce_inputs.bring_metrics("shared2", layout.with_run_id("shared2")) is None
    assert capsys.readouterr().out == ""
