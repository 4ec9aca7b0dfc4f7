"""B2 mirroring against b2sdk's in-process RawSimulator, including failures mid-upload."""

import hashlib
import io
import json
import logging
import signal

import pytest
from b2sdk.v2 import B2Api, B2HttpApiConfig, InMemoryAccountInfo, RawSimulator
from b2sdk.v2.exception import B2ConnectionError

from rl.harness import env_vars, errors
from rl.harness.commands import cli
from rl.harness.remote import b2_mirror, run_fetch, run_mirror, store
from rl.harness.remote import store as store_module
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.tests import run_helpers

BUCKET = "rl-runs"


class FlakySimulator(RawSimulator):
    """Uploads succeed until `fail_after` files arrived; then every upload fails (a dead link)."""

    fail_after = None
    message = "connection reset"

    def upload_file(self, *args, **kwargs):
        if self.fail_after is not None and self.uploads >= self.fail_after:
            raise B2ConnectionError(self.message)
        self.uploads += 1
        return super().upload_file(*args, **kwargs)


@pytest.fixture
def simulator():
    simulator = FlakySimulator()
    simulator.uploads = 0
    return simulator


@pytest.fixture
def credentials(simulator):
    key_id, key = simulator.create_account()
    api = B2Api(InMemoryAccountInfo(), api_config=_config(simulator))
    api.authorize_account("production", key_id, key)
    api.create_bucket(BUCKET, "allPrivate")
    return b2_mirror.b2_config(key_id, key, BUCKET, "lab", "environment")


def _config(simulator):
    return B2HttpApiConfig(_raw_api_class=lambda http: simulator)


def _connect(simulator, delays):
    return lambda credentials: b2_mirror.connect(
        credentials, api_config=_config(simulator), backoff_s=1.0, attempts=3, sleep=delays.append
    )


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A finished fake run: (results dir, artifacts dir)."""
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    argv = [
        "rl-harness",
        run_helpers.FAKE,
        "--run-id",
        "r1",
        "--no-upload-artifacts",
        "--results-dir",
        str(tmp_path / "r"),
        "--artifacts-dir",
        str(tmp_path / "a"),
    ]
    assert cli.main(argv) == 0
    return tmp_path / "r" / "r1", tmp_path / "a" / "r1"


def _layout(run) -> RunLayout:
    results, artifacts = run
    return RunLayout(results.parent, artifacts.parent, "r1", smoke=False)


def _snapshot(*folders):
    return {str(path): path.read_bytes() for folder in folders for path in sorted(folder.rglob("*")) if path.is_file()}


def _download(simulator, credentials, key):
    api = B2Api(InMemoryAccountInfo(), api_config=_config(simulator))
    api.authorize_account("production", credentials.key_id, credentials.key)
    buffer = io.BytesIO()
    api.get_bucket_by_name(BUCKET).download_file_by_name(key).save(buffer)
    return buffer.getvalue()


def test_upload_records_every_key_with_sha256_and_size(simulator, credentials, run):
    results, artifacts = run
    mirror = _connect(simulator, [])(credentials)
    record = run_mirror.upload_run(mirror, experiment=run_helpers.FAKE, layout=_layout(run))
    assert record == json.loads((results / records.REMOTE_ARTIFACTS_FILE).read_text())
    assert record["status"] == "complete" and record["run_prefix"] == f"lab/{run_helpers.FAKE}/r1"
    local = {f"artifacts/{p.relative_to(artifacts).as_posix()}": p for p in artifacts.rglob("*") if p.is_file()}
    local.update(
        {
            f"results/{p.relative_to(results).as_posix()}": p
            for p in results.rglob("*")
            if p.is_file() and p.name != records.REMOTE_ARTIFACTS_FILE
        }
    )
    assert {entry["local"] for entry in record["files"]} == set(local)
    assert "artifacts/checkpoints/iter_000004/harness_checkpoint.json" in local
    for entry in record["files"]:
        content = local[entry["local"]].read_bytes()
        assert entry["key"] == f"{record['run_prefix']}/{entry['local']}"
        assert (entry["size"], entry["sha256"]) == (len(content), hashlib.sha256(content).hexdigest())
        assert _download(simulator, credentials, entry["key"]) == content


def test_transient_errors_are_retried_with_backoff(simulator, credentials, run):
    simulator.fail_after = 2
    delays = []
    mirror = _connect(simulator, delays)(credentials)

    def recover(seconds):  # the link comes back after the first backoff
        delays.append(seconds)
        simulator.fail_after = None

    mirror._sleep = recover
    record = run_mirror.upload_run(mirror, experiment=run_helpers.FAKE, layout=_layout(run))
    assert record["status"] == "complete" and delays == [1.0]


def test_a_failure_mid_upload_keeps_everything_local_and_records_what_arrived(simulator, credentials, run, caplog):
    before = _snapshot(*run)
    simulator.fail_after = 3
    simulator.message = f"connection reset while sending with key {credentials.key}"
    delays = []
    mirror = _connect(simulator, delays)(credentials)
    with caplog.at_level(logging.WARNING), pytest.raises(store.UploadError) as failure:
        run_mirror.upload_run(mirror, experiment=run_helpers.FAKE, layout=_layout(run))
    assert delays == [1.0, 2.0]  # exponential backoff between the three attempts
    record = json.loads((run[0] / records.REMOTE_ARTIFACTS_FILE).read_text())
    arrived = set(mirror.list_keys(f"lab/{run_helpers.FAKE}/r1")) - {
        record["run_prefix"] + f"/results/{records.REMOTE_ARTIFACTS_FILE}"
    }
    assert record["status"] == "failed" and {entry["key"] for entry in record["files"]} == arrived
    assert 0 < len(arrived) < len(record["files"]) + len(record["not_uploaded"])
    assert record["error"]["file"] == record["not_uploaded"][0] and len(record["not_uploaded"]) > 0
    after = _snapshot(*run)
    after.pop(str(run[0] / records.REMOTE_ARTIFACTS_FILE))
    assert after == before  # nothing local was changed or deleted
    for text in (str(failure.value), json.dumps(record), caplog.text):
        assert credentials.key not in text and credentials.key_id not in text
    assert "<redacted>" in str(failure.value)


def test_cli_explicit_upload_failure_exits_nonzero_but_auto_only_warns(simulator, credentials, tmp_path, monkeypatch):
    monkeypatch.setenv(env_vars.B2_KEY_ID_ENV, credentials.key_id)
    monkeypatch.setenv(env_vars.B2_KEY_ENV, credentials.key)
    monkeypatch.setenv(env_vars.B2_BUCKET_ENV, BUCKET)
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    monkeypatch.setenv(env_vars.MIRROR_DRAIN_ENV, "2")
    connect = _connect(simulator, [])
    base = [
        "rl-harness",
        run_helpers.FAKE,
        "--results-dir",
        str(tmp_path / "r"),
        "--artifacts-dir",
        str(tmp_path / "a"),
    ]

    assert cli.main([*base, "--run-id", "ok", "--upload-artifacts"], connect_store=connect) == 0
    remote = run_helpers.manifest(tmp_path / "r" / "ok")["remote"]
    assert remote["status"] == "complete" and remote["files"] > 0

    simulator.fail_after = simulator.uploads + 1  # the start-up check's probe arrives, the run's files do not
    assert (
        cli.main([*base, "--run-id", "bad", "--upload-artifacts"], connect_store=connect) == errors.EXIT_UPLOAD_FAILED
    )
    manifest = run_helpers.manifest(tmp_path / "r" / "bad")
    assert (manifest["status"], manifest["remote"]["status"], manifest["exit_code"]) == ("completed", "incomplete", 3)
    assert manifest["remote"]["not_uploaded"] > 0
    assert (tmp_path / "a" / "bad" / records.METRICS_FILE).exists()

    simulator.fail_after = simulator.uploads + 1
    assert cli.main([*base, "--run-id", "auto"], connect_store=connect) == 0  # not asked for: a warning only
    assert run_helpers.manifest(tmp_path / "r" / "auto")["remote"]["status"] == "incomplete"
    assert cli.main([*base, "--run-id", "off", "--no-upload-artifacts"], connect_store=connect) == 0
    assert run_helpers.manifest(tmp_path / "r" / "off")["remote"] is None
    for path in (tmp_path / "r").rglob("*.json"):
        assert credentials.key not in path.read_text() and credentials.key_id not in path.read_text()


def test_wrong_credentials_fail_without_leaking_them(simulator, credentials):
    wrong = b2_mirror.b2_config(credentials.key_id, "not-the-key-123", BUCKET, "lab", "environment")
    with pytest.raises(store.StoreUnusable, match=f"refused the key.*fix \\${env_vars.B2_KEY_ID_ENV} and") as failure:
        _connect(simulator, [])(wrong).check()
    assert "not-the-key-123" not in str(failure.value) and credentials.key_id not in str(failure.value)
    assert "not-the-key-123" not in repr(wrong)


def test_credentials_from_the_environment():
    environ = {env_vars.B2_KEY_ID_ENV: "id", env_vars.B2_KEY_ENV: "secret", env_vars.B2_BUCKET_ENV: "b"}
    credentials = b2_mirror.load_credentials(environ)
    assert (credentials.bucket, credentials.prefix, credentials.source) == ("b", "rl-harness", "environment")
    with pytest.raises(store.CredentialsError, match=env_vars.B2_BUCKET_ENV) as failure:
        b2_mirror.load_credentials({env_vars.B2_KEY_ID_ENV: "id", env_vars.B2_KEY_ENV: "secret"})
    assert "secret" not in str(failure.value)


def test_credentials_from_a_file(tmp_path):
    path = tmp_path / "b2.json"
    path.write_text(json.dumps({"application_key_id": "id", "application_key": "k", "bucket": "b", "prefix": "p"}))
    path.chmod(0o600)
    credentials = b2_mirror.load_credentials({env_vars.B2_CREDENTIALS_FILE_ENV: str(path)})
    assert (credentials.key_id, credentials.prefix, credentials.source) == ("id", "p", str(path))
    path.write_text(json.dumps({"application_key_id": "id"}))
    with pytest.raises(store.CredentialsError, match="lacks application_key, bucket"):
        b2_mirror.load_credentials({env_vars.B2_CREDENTIALS_FILE_ENV: str(path)})
    with pytest.raises(store.CredentialsError, match="cannot read"):
        b2_mirror.load_credentials({env_vars.B2_CREDENTIALS_FILE_ENV: str(tmp_path / "missing.json")})


def test_no_credentials_means_no_upload(tmp_path):
    assert b2_mirror.load_credentials({"HOME": str(tmp_path)}) is None
    default = tmp_path / ".config" / "rl-harness" / "b2.json"
    default.parent.mkdir(parents=True)
    default.write_text(json.dumps({"application_key_id": "id", "application_key": "k", "bucket": "b"}))
    assert b2_mirror.load_credentials({"HOME": str(tmp_path)}).source == str(default)


class SignalMidUpload(RawSimulator):
    """A user's Ctrl-C or a scheduler's SIGTERM while the second file uploads."""

    signal_number = signal.SIGTERM

    def upload_file(self, *args, **kwargs):
        self.uploads += 1
        if self.uploads == 2:
            signal.raise_signal(self.signal_number)
        return super().upload_file(*args, **kwargs)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_the_upload_stops_it_and_ends_the_run_interrupted(tmp_path, monkeypatch, signal_number):
    simulator = SignalMidUpload()
    simulator.uploads, simulator.signal_number = 0, signal_number
    key_id, key = simulator.create_account()
    api = B2Api(InMemoryAccountInfo(), api_config=_config(simulator))
    api.authorize_account("production", key_id, key)
    api.create_bucket(BUCKET, "allPrivate")
    for name, value in ((env_vars.B2_KEY_ID_ENV, key_id), (env_vars.B2_KEY_ENV, key), (env_vars.B2_BUCKET_ENV, BUCKET)):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    status = cli.main(
        [
            "rl-harness",
            run_helpers.FAKE,
            "--run-id",
            "up",
            "--upload-artifacts",
            "--results-dir",
            str(tmp_path / "r"),
            "--artifacts-dir",
            str(tmp_path / "a"),
        ],
        connect_store=_connect(simulator, []),
    )
    manifest = run_helpers.manifest(tmp_path / "r" / "up")
    assert (status, manifest["exit_code"]) == (128 + signal_number, 128 + signal_number)
    assert (manifest["status"], manifest["interrupted_by"]) == ("interrupted", signal.Signals(signal_number).name)
    assert manifest["remote"]["status"] == "interrupted" and simulator.uploads == 2  # stopped at once
    assert [c["iteration"] for c in manifest["checkpoints"]] == [2]  # the run itself had finished
    assert len(run_helpers.metrics_rows(tmp_path / "a")) == 2
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are given back


def test_a_run_is_fetched_back_from_b2_verified(simulator, credentials, run, tmp_path):
    _results, artifacts = run
    store = _connect(simulator, [])(credentials)
    run_mirror.upload_run(store, experiment=run_helpers.FAKE, layout=_layout(run))
    remote = run_fetch.RemoteRun.find(store, "r1")
    assert (remote.experiment, remote.smoke) == (run_helpers.FAKE, False)
    here = RunLayout(tmp_path / "here" / "r", tmp_path / "here" / "a", "r1", smoke=False)
    fetched, kept = remote.fetch(here)
    assert kept == 0 and fetched == len(remote.entries())
    assert _snapshot(here.artifacts_dir) == {
        str(here.artifacts_dir / path.relative_to(artifacts)): path.read_bytes()
        for path in artifacts.rglob("*")
        if path.is_file()
    }


@pytest.mark.parametrize(
    "capabilities, refusal",
    [
        (["listBuckets", "listFiles", "writeFiles"], None),  # a launch's key: writes, never deletes
        (["listBuckets", "listFiles", "readFiles"], "the key may not write there"),
    ],
    ids=["write-no-delete", "read-only"],
)
def test_the_start_up_check_needs_write_access_but_not_delete(simulator, credentials, capabilities, refusal):
    api = B2Api(InMemoryAccountInfo(), api_config=_config(simulator))
    api.authorize_account("production", credentials.key_id, credentials.key)
    key = api.create_key(capabilities=capabilities, key_name="restricted")  # the simulator refuses uploads to a
    # key restricted to a bucket (it checks get_upload_url without the bucket), so only capabilities differ here
    restricted = b2_mirror.b2_config(key.id_, key.application_key, BUCKET, "lab", "environment")
    store = _connect(simulator, [])(restricted)
    if refusal is None:
        store.check()
    else:
        with pytest.raises(store_module.StoreUnusable, match=f"{refusal}.* fix \\${env_vars.B2_KEY_ID_ENV} and"):
            store.check()


def test_a_checkpoint_whose_state_file_is_indexed_is_whole_in_the_store_wherever_a_pass_stops(
    simulator, credentials, run
):
    _results, artifacts = run
    newest = max((artifacts / "checkpoints").glob("iter_*"))
    (newest / "rllib_checkpoint.json").write_text("{}")  # a file that sorts after the state file, as RLlib's does
    store = _connect(simulator, [])(credentials)
    folders = {
        f"artifacts/{folder.relative_to(artifacts).as_posix()}": {
            f"artifacts/{path.relative_to(artifacts).as_posix()}" for path in folder.rglob("*") if path.is_file()
        }
        for folder in (artifacts / "checkpoints").glob("iter_*")
    }
    files = sum(len(members) for members in folders.values())
    for uploads in range(files + 2):  # the store fails after each number of uploads in turn
        simulator.fail_after = simulator.uploads + uploads
        mirror = run_mirror.RunMirror(store, _layout(run), run_helpers.FAKE)
        try:
            mirror.send_pending(attempts=1)
        except store_module.UploadError:
            pass
        entries = {entry["local"]: entry for entry in mirror.record("failed")["files"]}
        for folder, members in folders.items():
            if f"{folder}/{records.CHECKPOINT_STATE_FILE}" in entries:
                assert members <= set(entries), (uploads, folder, members - set(entries))
                # ... and the metrics in the store hold the rows up to it (a resume carries them)
                metrics = entries[f"artifacts/{records.METRICS_FILE}"]
                rows = (artifacts / records.METRICS_FILE).read_bytes()[: metrics["size"]].decode().splitlines()
                assert json.loads(rows[-1])["training_iteration"] >= int(folder.rsplit("_", 1)[1]), (uploads, folder)


class RollingReplacedMidPass(FlakySimulator):
    """Removes `replaced` (a rolling checkpoint the run replaced) from the disk when the first file arrives."""

    replaced = None

    def upload_file(self, *args, **kwargs):
        if self.replaced is not None:
            for path in sorted(self.replaced.rglob("*"), reverse=True):
                path.rmdir() if path.is_dir() else path.unlink()
            self.replaced.rmdir()
            self.replaced = None
        return super().upload_file(*args, **kwargs)


def test_a_checkpoint_removed_while_a_pass_sends_it_is_skipped_not_a_store_fault(run):
    _results, artifacts = run
    simulator = RollingReplacedMidPass()
    simulator.uploads = 0
    key_id, key = simulator.create_account()
    api = B2Api(InMemoryAccountInfo(), api_config=_config(simulator))
    api.authorize_account("production", key_id, key)
    api.create_bucket(BUCKET, "allPrivate")
    store = _connect(simulator, [])(b2_mirror.b2_config(key_id, key, BUCKET, "lab", "environment"))
    replaced = min((artifacts / "checkpoints").glob("iter_*"))  # sent last: the older
    simulator.replaced = replaced
    mirror = run_mirror.RunMirror(store, _layout(run), run_helpers.FAKE)
    assert mirror.send_pending(attempts=1) > 0  # no UploadError: the pass goes on, records included
    indexed = {entry["local"] for entry in mirror.record("partial")["files"]}
    assert f"results/{records.MANIFEST_FILE}" in indexed and f"artifacts/{records.METRICS_FILE}" in indexed
    assert not any(local.startswith(f"artifacts/checkpoints/{replaced.name}/") for local in indexed)
