"""The durability gate: copy-back verified by sha256, and the B2 mirror verified object by object."""

import contextlib
import json
import os
import shutil
import stat
import subprocess

import pytest
from b2sdk.v2.exception import B2Error

from rl.devops.vast import durability, redact, state
from rl.devops.vast.testing import b2_simulator
from rl.devops.vast.testing.leaks import assert_no_secret
from rl.harness import RunLayout, env_vars
from rl.harness.remote import b2_mirror, run_mirror

PORT = 20001
RUN = "20250102T030405Z-ab12cd-000"
RESULTS = {f"results/{RUN}/run_manifest.json": b'{"status": "completed"}'}
ARTIFACTS = {
    f"artifacts/{RUN}/metrics.jsonl": b'{"iteration": 1}\n',
    f"artifacts/{RUN}/checkpoints/final.pt": b"\x00" * 4096,
}
ROW = {"id": 70001, "ssh_host": "127.0.0.1", "ssh_port": PORT, "actual_status": "running"}


def _record(sink="copy", dest="/unused", bucket=None):
    return state.Record(
        label="rlh-ab12cd-000-1",
        launch_id="ab12cd",
        target="//experiments/x:y",
        seed=0,
        run_id=RUN,
        sink=sink,
        dest=str(dest),
        remote_out="/workspace/rlh/out",
        b2_bucket=bucket,
        instance_id=70001,
        status=state.RUNNING,
    )


def _copy(tmp_path, rsync, **fields):
    return durability.CopyBack(
        dest=tmp_path / "dest", known_hosts_dir=tmp_path / "known_hosts.d", runner=rsync, **fields
    )


def test_copy_back_brings_everything_and_verifies_it(tmp_path, disks, rsync):
    disks.finish_run(port=PORT, run_id=RUN, files={**RESULTS, **ARTIFACTS})
    secured = _copy(tmp_path, rsync).secure(_record(), ROW)
    assert secured.files == 3 and secured.bytes == sum(len(c) for c in {**RESULTS, **ARTIFACTS}.values())
    assert (tmp_path / "dest" / RUN / "artifacts" / RUN / "checkpoints" / "final.pt").read_bytes() == b"\0" * 4096
    (command,) = rsync.calls
    assert (
        command[:4] == ["rsync", "-rlt", "--safe-links", "--partial"]
        and command[-2] == "root@127.0.0.1:/workspace/rlh/out/"
    )
    assert f"-p {PORT}" in command[command.index("-e") + 1]
    assert f"UserKnownHostsFile={tmp_path / 'known_hosts.d' / 'instance-70001'}" in command[command.index("-e") + 1]


@pytest.mark.skipif(shutil.which("rsync") is None, reason="needs rsync")
def test_a_copy_from_a_hostile_instance_brings_no_device_owner_or_setuid_bit(tmp_path):
    """CopyBack's own flags, with a local folder standing in for the instance (run as root in CI)."""
    instance = tmp_path / "instance"
    instance.mkdir()
    setuid = instance / "shell"
    setuid.write_bytes(b"#!/bin/sh\n")
    setuid.chmod(0o4755)
    os.mkfifo(instance / "pipe")
    try:
        os.mknod(instance / "disk", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    except OSError:  # not root, or a sandbox that forbids device nodes: the rest still tests
        pass
    with contextlib.suppress(OSError):  # not root, or a user namespace that maps no other owner
        os.chown(setuid, 4321, 4321)
    command = _copy(tmp_path, None).rsync_command(_record(), ROW)
    ssh = command.index("-e")
    local = [*command[:ssh], *command[ssh + 2 : -2], f"{instance}/", f"{tmp_path / 'copy'}/"]
    subprocess.run(local, check=True, capture_output=True)
    copied = tmp_path / "copy"
    assert sorted(path.name for path in copied.iterdir()) == ["shell"]  # no fifo, no device node
    mode = (copied / "shell").stat()
    assert not mode.st_mode & (stat.S_ISUID | stat.S_ISGID) and mode.st_uid == os.geteuid()


def test_a_failed_copy_is_a_durability_error_with_the_key_redacted(tmp_path, disks, rsync, api_key):
    redact.register_secret(api_key)
    disks.finish_run(port=PORT, run_id=RUN, files=RESULTS)
    rsync.failures[PORT] = (12, f"rsync: connection unexpectedly closed; env VAST_API_KEY={api_key}")
    with pytest.raises(durability.DurabilityError, match="rsync exit 12") as caught:
        _copy(tmp_path, rsync).secure(_record(), ROW)
    assert_no_secret(api_key, caught.value)


def test_a_copy_that_differs_from_the_instance_checksums_fails(tmp_path, disks, rsync):
    disks.finish_run(port=PORT, run_id=RUN, files={**RESULTS, **ARTIFACTS})
    (disks.out_dir(PORT) / f"artifacts/{RUN}/metrics.jsonl").write_bytes(b"truncated")
    (disks.out_dir(PORT) / f"results/{RUN}/run_manifest.json").unlink()
    with pytest.raises(durability.DurabilityError, match="2 of 3 files .* failed verification") as caught:
        _copy(tmp_path, rsync).secure(_record(), ROW)
    assert "metrics.jsonl sha256 differs" in str(caught.value) and "run_manifest.json missing" in str(caught.value)


def test_without_the_checksum_list_nothing_counts_as_secured(tmp_path, disks, rsync):
    disks.out_dir(PORT).mkdir(parents=True)
    with pytest.raises(durability.DurabilityError, match="has not finished"):
        _copy(tmp_path, rsync).secure(_record(), ROW)


def test_an_instance_without_ssh_yet_is_not_secured(tmp_path, rsync):
    with pytest.raises(redact.DevopsError, match="no SSH endpoint yet"):
        _copy(tmp_path, rsync).secure(_record(), {"id": 1, "actual_status": "loading"})


def test_odd_checksum_lines_are_errors_not_skipped():
    with pytest.raises(durability.DurabilityError, match="line 2"):
        durability.parse_checksums(f"{'a' * 64}  results/x\n{'b' * 64}  ../escape\n")


# ---- B2: the harness's real upload (rl.harness.remote.b2_mirror) into b2sdk's RawSimulator, then our check ----------


@pytest.fixture
def simulated():
    """(bucket, credentials) in an in-process simulated B2 (no network)."""
    return b2_simulator.bucket("rl-artifacts", prefix="rl-harness")


def _mirror(tmp_path, disks, rsync, simulated, *, smoke=False, upload=True, uploader=None):
    """The run wrote results and artifacts; the harness uploaded them to B2 (as `uploader`: (bucket,
    credentials), by default the account's own); the bootstrap finished."""
    bucket, credentials = uploader or simulated
    run_folder = f"smoke/{RUN}" if smoke else RUN
    out = disks.out_dir(PORT)
    for relative, content in {**RESULTS, **ARTIFACTS}.items():
        path = out / relative.replace(RUN, run_folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    if upload:
        run_mirror.upload_run(
            b2_mirror.B2Store(bucket.api, credentials),
            experiment="experiments.x.y",
            layout=RunLayout(out / "results", out / "artifacts", RUN, smoke),
        )
    disks.finish_run(port=PORT, run_id=RUN, files={})
    copy = _copy(tmp_path, rsync, include_artifacts=False)
    return durability.B2Mirror(copy=copy, store=durability.B2Store(simulated[0]), prefix=simulated[1].prefix)


def _remote(disks, smoke=False):
    run_folder = f"smoke/{RUN}" if smoke else RUN
    path = disks.out_dir(PORT) / "results" / run_folder / "remote_artifacts.json"
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("smoke", [False, True])
def test_the_harness_b2_upload_is_verified(tmp_path, disks, rsync, simulated, smoke):
    sink = _mirror(tmp_path, disks, rsync, simulated, smoke=smoke)
    secured = sink.secure(_record("b2", bucket="rl-artifacts"), ROW)
    assert "3 objects (4136 bytes) verified in b2://rl-artifacts" in secured.summary  # 23 + 17 + 4096 bytes
    assert not (tmp_path / "dest" / RUN / "artifacts").exists()  # artifacts stayed in B2 only
    assert "--exclude=/artifacts/" in rsync.calls[0]


def test_objects_without_sha256_info_are_downloaded_and_hashed(tmp_path, disks, rsync, simulated):
    bucket, _ = simulated
    sink = _mirror(tmp_path, disks, rsync, simulated)
    _, document = _remote(disks)
    entry = document["files"][0]
    bucket.upload_bytes(b"x" * entry["size"], entry["key"])  # same size, other bytes, no sha256 info
    with pytest.raises(durability.DurabilityError, match="sha256 in B2 differs"):
        sink.secure(_record("b2", bucket="rl-artifacts"), ROW)


def test_b2_missing_or_resized_objects_fail(tmp_path, disks, rsync, simulated):
    bucket, _ = simulated
    sink = _mirror(tmp_path, disks, rsync, simulated)
    _, document = _remote(disks)
    first, second = document["files"][:2]
    gone = bucket.get_file_info_by_name(first["key"])
    bucket.delete_file_version(gone.id_, first["key"])
    bucket.upload_bytes(b"other", second["key"], file_info={"sha256": second["sha256"]})
    with pytest.raises(durability.DurabilityError, match="2 problems") as caught:
        sink.secure(_record("b2", bucket="rl-artifacts"), ROW)
    assert f"{first['key']} missing in B2" in str(caught.value)
    assert f"{second['key']} has 5 bytes in B2, {second['size']} recorded" in str(caught.value)


def test_an_artifact_missing_from_the_upload_record_fails(tmp_path, disks, rsync, simulated):
    sink = _mirror(tmp_path, disks, rsync, simulated)
    path, document = _remote(disks)
    document["files"] = [f for f in document["files"] if not f["local"].endswith("final.pt")]
    path.write_text(json.dumps(document))
    disks.finish_run(port=PORT, run_id=RUN, files={})  # the instance's sums include the edit
    with pytest.raises(durability.DurabilityError, match="final.pt .produced on the instance. is not in B2"):
        sink.secure(_record("b2", bucket="rl-artifacts"), ROW)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"status": "failed", "error": {"file": "artifacts/x", "message": "503"}}, "upload is 'failed', not complete"),
        ({"bucket": "elsewhere"}, "names bucket 'elsewhere'"),
        ({"schema_version": 9}, "schema_version 9"),
        ({"files": [{"key": "k"}]}, "is not a list of"),
    ],
)
def test_an_incomplete_or_foreign_upload_record_fails(tmp_path, disks, rsync, simulated, change, message):
    sink = _mirror(tmp_path, disks, rsync, simulated)
    path, document = _remote(disks)
    path.write_text(json.dumps({**document, **change}))
    disks.finish_run(port=PORT, run_id=RUN, files={})
    with pytest.raises(durability.DurabilityError, match=message):
        sink.secure(_record("b2", bucket="rl-artifacts"), ROW)


def test_no_upload_record_means_not_verified(tmp_path, disks, rsync, simulated):
    sink = _mirror(tmp_path, disks, rsync, simulated, upload=False)
    with pytest.raises(durability.DurabilityError, match="was it started with --upload-artifacts"):
        sink.secure(_record("b2", bucket="rl-artifacts"), ROW)


def test_b2_credentials_are_the_harness_ones_and_are_redacted(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials file either
    with pytest.raises(redact.DevopsError, match="the b2 sink needs the harness's B2 credentials"):
        durability.b2_credentials()
    monkeypatch.setenv(env_vars.B2_KEY_ID_ENV, "keyid-0123456789")
    monkeypatch.setenv(env_vars.B2_KEY_ENV, "appkey-0123456789abcdef")
    monkeypatch.setenv(env_vars.B2_BUCKET_ENV, "rl-artifacts")
    credentials = durability.b2_credentials()
    assert redact.redact(f"{credentials.key_id} {credentials.key}") == f"{redact.MASK} {redact.MASK}"


def _instance_credentials(simulated, launch_id="ab12cd"):
    """What an instance of the launch gets: (its bucket as it sees it, its harness's credentials, its env)."""
    bucket, local = simulated
    env = durability.B2Mirror(copy=None, store=durability.B2Store(bucket), prefix=local.prefix).instance_env(
        launch_id=launch_id, valid_for_s=7200
    )
    credentials = b2_mirror.load_credentials(env)  # read as the instance's harness reads its environment
    return b2_simulator.open_bucket(bucket, credentials.key_id, credentials.key), credentials, env


def test_each_launch_gets_its_own_key_restricted_to_its_prefix_and_the_local_key_stays_here(
    tmp_path, disks, rsync, simulated
):
    bucket, local = simulated
    instance_bucket, credentials, env = _instance_credentials(simulated)
    assert_no_secret(local.key, env)
    assert local.key_id not in env.values()
    assert (credentials.bucket, credentials.prefix) == ("rl-artifacts", "rl-harness/launches/ab12cd")
    allowed = instance_bucket.api.account_info.get_allowed()
    assert sorted(allowed["capabilities"]) == ["listBuckets", "listFiles", "writeFiles"]  # no deleteFiles
    assert (allowed["bucketName"], allowed["namePrefix"]) == ("rl-artifacts", "rl-harness/launches/ab12cd/")
    key = next(k for k in bucket.api.list_keys() if k.id_ == credentials.key_id)
    assert key.key_name == "rlh-ab12cd" and key.expiration_timestamp_millis is not None
    assert redact.redact(credentials.key) == redact.MASK
    # The instance's harness uploads its run with its key; this machine verifies it with its own.
    sink = _mirror(tmp_path, disks, rsync, simulated, uploader=(instance_bucket, credentials))
    secured = sink.secure(_record("b2", bucket="rl-artifacts"), ROW)
    assert "3 objects (4136 bytes) verified in b2://rl-artifacts" in secured.summary
    _, document = _remote(disks)
    assert document["run_prefix"] == f"rl-harness/launches/ab12cd/experiments.x.y/{RUN}"


def test_a_launch_key_cannot_delete_nor_reach_other_runs(simulated):
    bucket, _ = simulated
    other = bucket.upload_bytes(b"another launch's checkpoint", "rl-harness/launches/ffffff/x/ckpt")
    instance_bucket, _, _ = _instance_credentials(simulated)
    own = instance_bucket.upload_bytes(b"mine", "rl-harness/launches/ab12cd/x/file")
    assert [v.file_name for v, _ in instance_bucket.ls("rl-harness/launches/ab12cd", recursive=True)] == [own.file_name]
    for attempt in (
        lambda: instance_bucket.delete_file_version(own.id_, own.file_name),
        lambda: instance_bucket.delete_file_version(other.id_, other.file_name),
        lambda: instance_bucket.upload_bytes(b"overwrite", other.file_name),
        lambda: list(instance_bucket.ls("rl-harness/launches/ffffff", recursive=True)),
    ):
        with pytest.raises(B2Error):
            attempt()
    assert bucket.get_file_info_by_name(other.file_name).size == len(b"another launch's checkpoint")


def test_sink_specs_are_checked():
    with pytest.raises(redact.DevopsError, match="a b2 sink names its bucket"):
        durability.SinkSpec(kind="b2", dest="d", remote_out="/o")
    with pytest.raises(redact.DevopsError, match="use 'copy', 'b2' or 'store'"):
        durability.SinkSpec(kind="s3", dest="d", remote_out="/o")


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed (apt-get install -y rsync)")
def test_the_copy_back_drops_links_that_lead_out_of_the_instance_output(tmp_path, disks):
    """The real rsync with CopyBack's own flags, the instance's folder reached locally instead of over SSH."""
    out = disks.out_dir(PORT)
    (out / "results" / RUN).mkdir(parents=True)
    (out / "results" / RUN / "run_manifest.json").write_text("{}")
    (out / "results" / RUN / "ssh").symlink_to("/root/.ssh")  # planted by the instance
    (out / "results" / RUN / "up").symlink_to("../../../../..")
    (out / "results" / RUN / "manifest_link").symlink_to("run_manifest.json")  # inside: kept
    copy = _copy(tmp_path, durability.run_command)
    command = copy.rsync_command(_record(), ROW)
    at = command.index("-e")
    local = copy.local_dir(_record())
    local.mkdir(parents=True)
    result = durability.run_command([*command[:at], *command[at + 2 : -2], f"{out}/", f"{local}/"])
    assert result.returncode == 0, result.stderr
    copied = local / "results" / RUN
    assert (copied / "run_manifest.json").is_file() and (copied / "manifest_link").is_symlink()
    assert not os.path.lexists(copied / "ssh") and not os.path.lexists(copied / "up")


def test_a_local_key_that_cannot_make_keys_is_named_with_the_fix(simulated):
    bucket, _ = simulated
    weak = bucket.api.create_key(capabilities=["listBuckets", "listFiles", "readFiles"], key_name="verify-only")
    store = durability.B2Store(b2_simulator.open_bucket(bucket, weak.id_, weak.application_key))
    with pytest.raises(redact.DevopsError, match="launch ab12cd .*needs the writeKeys capability"):
        store.launch_credentials(prefix="rl-harness", launch_id="ab12cd", valid_for_s=60)
