"""The s3:// store against a real S3-compatible server (moto's, started here, IAM enforced): uploads
verified byte for byte, each start-up fault refused with exit 2 before anything is written, runs
mirrored while they train (slow), a server stopped mid-run, and `sync`."""

import hashlib
import json
import logging
import re
import threading
import time

import pytest

from rl.harness import env_vars
from rl.harness.commands import cli
from rl.harness.remote import run_mirror, stores
from rl.harness.remote.store import CredentialsError, StoreUnusable, UploadError
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.tests import run_helpers, s3_server


@pytest.fixture(scope="module")
def server():
    with s3_server.S3Server() as running:
        yield running


def _environment(monkeypatch, server, *, url=None, endpoint=None, key=None):
    key_id, secret = key or server.read_write
    monkeypatch.setenv(env_vars.STORE_ENV, url or f"s3://{server.bucket}/lab")
    monkeypatch.setenv(env_vars.STORE_ENDPOINT_ENV, endpoint or server.endpoint)
    monkeypatch.setenv(env_vars.S3_KEY_ID_ENV, key_id)
    monkeypatch.setenv(env_vars.S3_KEY_ENV, secret)
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")


def _run(tmp_path, run_id, *extra):
    return cli.main(
        [
            "rl-harness",
            run_helpers.FAKE,
            "--run-id",
            run_id,
            "--results-dir",
            str(tmp_path / "r"),
            "--artifacts-dir",
            str(tmp_path / "a"),
            *extra,
        ]
    )


def test_a_run_uploads_every_file_verified_to_an_s3_server(server, tmp_path, monkeypatch):
    _environment(monkeypatch, server)
    assert _run(tmp_path, "s3ok", "--upload-artifacts") == 0
    remote = json.loads((tmp_path / "r" / "s3ok" / records.REMOTE_ARTIFACTS_FILE).read_text())
    assert remote["status"] == "complete" and remote["store"] == f"s3://{server.bucket}/lab"
    assert remote["run_prefix"] == f"lab/{run_helpers.FAKE}/s3ok"
    assert "artifacts/checkpoints/iter_000002/harness_checkpoint.json" in {entry["local"] for entry in remote["files"]}
    objects = s3_server.reader(server)
    for entry in remote["files"]:
        with objects.open_input_stream(f"{server.bucket}/{entry['key']}") as stream:
            content = stream.read()
        assert (entry["size"], entry["sha256"]) == (len(content), hashlib.sha256(content).hexdigest())
        if entry["local"].startswith("artifacts/"):  # the manifest changes after the upload: it records the upload
            assert content == (tmp_path / "a" / "s3ok" / entry["local"].split("/", 1)[1]).read_bytes()
    manifest = run_helpers.manifest(tmp_path / "r" / "s3ok")
    assert (manifest["remote"]["status"], manifest["remote"]["files"]) == ("complete", len(remote["files"]))
    for path in (tmp_path / "r").rglob("*"):
        if path.is_file():
            assert server.read_write[1] not in path.read_text() and server.read_write[0] not in path.read_text()


def test_a_file_named_like_a_compressed_one_is_stored_as_its_bytes(server, tmp_path, monkeypatch):
    """pyarrow guesses a compression from a path's extension unless told not to: `.gz` would be gzipped again."""
    _environment(monkeypatch, server)
    store = stores.open_store(stores.load())
    payload = b"not gzip, whatever the name says\n" * 100
    (tmp_path / "x.tar.gz").write_bytes(payload)
    store.put_file(str(tmp_path / "x.tar.gz"), "lab/x.tar.gz", hashlib.sha256(payload).hexdigest(), len(payload))
    with s3_server.reader(server).open_input_stream(f"{server.bucket}/lab/x.tar.gz", compression=None) as stream:
        assert stream.read() == payload  # what any other client reads
    store.get_file("lab/x.tar.gz", str(tmp_path / "back.tar.gz"))
    assert (tmp_path / "back.tar.gz").read_bytes() == payload


def test_a_prefix_that_holds_another_runs_records_is_never_overwritten(server, tmp_path, monkeypatch, capsys):
    _environment(monkeypatch, server)
    assert _run(tmp_path / "first", "taken", "--upload-artifacts") == 0
    assert _run(tmp_path / "second", "taken", "--upload-artifacts") == 2
    assert f"lab/{run_helpers.FAKE}/taken already holds a run's records" in capsys.readouterr().err
    assert not (tmp_path / "second" / "r" / "taken").exists()


def _faults(server):
    dead = f"http://127.0.0.1:{s3_server.free_port()}"
    wrong_secret = (server.read_write[0], "w" * 40)
    return {
        "unreachable": ({"endpoint": dead}, f"is unreachable .* fix \\${env_vars.STORE_ENDPOINT_ENV}$"),
        "wrong key": (
            {"key": wrong_secret},
            (f"refused the key .* fix \\${env_vars.S3_KEY_ID_ENV} and \\${env_vars.S3_KEY_ENV}$"),
        ),
        "no bucket": (
            {"url": "s3://no-such-bucket/lab"},
            (f"bucket 'no-such-bucket' does not exist .* fix \\${env_vars.STORE_ENV}$"),
        ),
        "read-only key": (
            {"key": server.read_only},
            (f"the key may not write there .* give it write access or fix \\${env_vars.S3_KEY_ID_ENV}"),
        ),
    }


@pytest.mark.parametrize("fault", ["unreachable", "wrong key", "no bucket", "read-only key"])
def test_each_start_up_fault_exits_2_before_anything_is_written(server, tmp_path, monkeypatch, capsys, fault):
    change, message = _faults(server)[fault]
    _environment(monkeypatch, server, **change)
    assert _run(tmp_path, "refused") == 2  # automatic mirroring is checked as strictly as --upload-artifacts
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and re.search(message, error[0]), error
    assert not (tmp_path / "r").exists() and not (tmp_path / "a").exists()
    for secret in (*server.read_write, *server.read_only, "w" * 40):
        assert secret not in error[0]


def test_a_store_file_is_named_as_the_fix(server, tmp_path, monkeypatch):
    path = tmp_path / "store.json"
    path.write_text(
        json.dumps(
            {
                "url": f"s3://{server.bucket}/lab",
                "endpoint": server.endpoint,
                "key_id": server.read_only[0],
                "key": server.read_only[1],
            }
        )
    )
    path.chmod(0o600)
    monkeypatch.setenv(env_vars.STORE_FILE_ENV, str(path))
    config = stores.load()
    assert (config.scheme, config.bucket, config.prefix, config.source) == ("s3", server.bucket, "lab", str(path))
    with pytest.raises(StoreUnusable, match=f"may not write there .* fix the store file {path}$"):
        stores.open_store(config).check()


def test_a_store_stopped_after_the_start_up_check_fails_the_upload_and_keeps_everything_local(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    assert _run(tmp_path, "r1", "--no-upload-artifacts") == 0
    with s3_server.S3Server() as server:
        _environment(monkeypatch, server)
        store = stores.open_store(stores.load(), backoff_s=0.01, attempts=2)
        store.check()
        server.stop()
        with pytest.raises(UploadError, match="failed 2 times"):
            run_mirror.upload_run(
                store, experiment=run_helpers.FAKE, layout=RunLayout(tmp_path / "r", tmp_path / "a", "r1", False)
            )
    remote = json.loads((tmp_path / "r" / "r1" / records.REMOTE_ARTIFACTS_FILE).read_text())
    assert remote["status"] == "failed" and remote["files"] == [] and remote["not_uploaded"]
    assert (tmp_path / "a" / "r1" / records.METRICS_FILE).exists()


def test_configuration_mistakes_name_their_fix(tmp_path):
    with pytest.raises(CredentialsError, match=f"\\${env_vars.STORE_ENV}='ftp://x' is not a store URL"):
        stores.load({env_vars.STORE_ENV: "ftp://x"})
    with pytest.raises(CredentialsError, match=f"\\${env_vars.S3_KEY_ENV} is not set"):
        stores.load({env_vars.STORE_ENV: "s3://b/p", env_vars.S3_KEY_ID_ENV: "id"})
    with pytest.raises(CredentialsError, match=f"\\${env_vars.STORE_ENDPOINT_ENV} is for s3:// stores"):
        stores.load(
            {
                env_vars.STORE_ENV: "b2://b/p",
                env_vars.B2_KEY_ID_ENV: "i",
                env_vars.B2_KEY_ENV: "k",
                env_vars.STORE_ENDPOINT_ENV: "http://x",
            }
        )
    config = stores.load({env_vars.STORE_ENV: "b2://bucket", env_vars.B2_KEY_ID_ENV: "i", env_vars.B2_KEY_ENV: "k"})
    assert (config.url, config.endpoint) == ("b2://bucket/rl-harness", None)
    assert stores.load({"HOME": str(tmp_path)}) is None


# -- mirrored while the run goes ---------------------------------------------------------------------------------


def _watch(server, key, folder, until):
    """Polls the store (another client) from a thread until `key` is there; returns {"status": the run's local
    status then}, filled in when it arrives, and calls `until()` then."""
    seen, objects = {}, s3_server.reader(server)

    def poll():
        while not seen and not stop.is_set():
            if s3_server.exists(objects, f"{server.bucket}/{key}"):
                seen["status"] = run_helpers.manifest(folder)["status"]
                until()
            time.sleep(0.05)

    stop = threading.Event()
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return seen, thread, stop


def _mirrored_run(monkeypatch, server):
    _environment(monkeypatch, server)
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "8")
    monkeypatch.setenv("FAKE_RECIPE_SLEEP_S", "0.4")
    monkeypatch.setenv(env_vars.MIRROR_INTERVAL_ENV, "0.2")
    monkeypatch.setenv(env_vars.MIRROR_DRAIN_ENV, "1")


def _assert_in_store(server, tmp_path, run_id):
    """Every file the local record lists is in the store with its sha256, and so is the record (the index)."""
    local = json.loads((tmp_path / "r" / run_id / records.REMOTE_ARTIFACTS_FILE).read_text())
    assert local["status"] == "complete" and local["not_uploaded"] == []
    objects = s3_server.reader(server)
    for entry in local["files"]:
        with objects.open_input_stream(f"{server.bucket}/{entry['key']}") as stream:
            assert hashlib.sha256(stream.read()).hexdigest() == entry["sha256"]
    with objects.open_input_stream(
        f"{server.bucket}/{local['run_prefix']}/results/{records.REMOTE_ARTIFACTS_FILE}"
    ) as stream:
        assert json.loads(stream.read())["files"] == local["files"]
    return local


@pytest.mark.slow
def test_a_run_is_mirrored_while_it_trains(server, tmp_path, monkeypatch):
    _mirrored_run(monkeypatch, server)
    checkpoint = f"lab/{run_helpers.FAKE}/live/artifacts/checkpoints/iter_000002/fake_state.json"
    seen, thread, stop = _watch(server, checkpoint, tmp_path / "r" / "live", lambda: None)
    try:
        assert _run(tmp_path, "live") == 0
    finally:
        stop.set()
        thread.join()
    assert seen == {"status": "running"}  # in the store while the run still trained
    local = _assert_in_store(server, tmp_path, "live")
    assert f"artifacts/{records.METRICS_FILE}" in {entry["local"] for entry in local["files"]}
    remote = run_helpers.manifest(tmp_path / "r" / "live")["remote"]
    assert (remote["status"], remote["files"], remote["not_uploaded"]) == ("complete", len(local["files"]), 0)


@pytest.mark.slow
def test_a_store_stopped_mid_run_costs_one_warning_and_sync_sends_the_rest(tmp_path, monkeypatch, caplog):
    with s3_server.S3Server() as lost:
        _mirrored_run(monkeypatch, lost)
        checkpoint = f"lab/{run_helpers.FAKE}/gone/artifacts/checkpoints/iter_000002/fake_state.json"
        seen, thread, stop = _watch(lost, checkpoint, tmp_path / "r" / "gone", lost.stop)
        with caplog.at_level(logging.WARNING):
            assert _run(tmp_path, "gone") == 0  # automatic mirroring: the run's own status decides
        stop.set()
        thread.join()
    assert seen == {"status": "running"}
    assert len([line for line in caplog.text.splitlines() if "the store failed" in line]) == 1
    manifest = run_helpers.manifest(tmp_path / "r" / "gone")
    assert manifest["status"] == "completed" and len(run_helpers.metrics_rows(tmp_path / "a")) == 8
    assert manifest["remote"]["status"] == "incomplete" and manifest["remote"]["not_uploaded"] > 0
    record = json.loads((tmp_path / "r" / "gone" / records.REMOTE_ARTIFACTS_FILE).read_text())
    assert "artifacts/checkpoints/iter_000008/fake_state.json" in record["not_uploaded"]
    with s3_server.S3Server() as back:  # the store again (a new, empty one: moto keeps nothing on disk)
        _environment(monkeypatch, back)
        assert (
            cli.main(
                [
                    "rl-harness",
                    "sync",
                    "gone",
                    "--results-dir",
                    str(tmp_path / "r"),
                    "--artifacts-dir",
                    str(tmp_path / "a"),
                ]
            )
            == 0
        )
        _assert_in_store(back, tmp_path, "gone")


@pytest.mark.slow
def test_sync_never_writes_over_another_runs_records(server, tmp_path, monkeypatch, capsys):
    _environment(monkeypatch, server)
    assert _run(tmp_path / "one", "twin", "--upload-artifacts") == 0
    monkeypatch.delenv(env_vars.STORE_ENV)
    assert _run(tmp_path / "two", "twin") == 0  # the same id on another machine, never mirrored
    _environment(monkeypatch, server)
    capsys.readouterr()
    assert (
        cli.main(
            [
                "rl-harness",
                "sync",
                "twin",
                "--results-dir",
                str(tmp_path / "two" / "r"),
                "--artifacts-dir",
                str(tmp_path / "two" / "a"),
            ]
        )
        == 2
    )
    assert "holds another run's records, which are never overwritten" in capsys.readouterr().err


# -- fetched back anywhere ---------------------------------------------------------------------------------------


def _roots(folder):
    return ["--results-dir", str(folder / "r"), "--artifacts-dir", str(folder / "a")]


@pytest.mark.slow
def test_a_run_is_fetched_back_verified_and_resumed_from_its_newest_checkpoint(
    server, tmp_path, monkeypatch, capsys, caplog
):
    _environment(monkeypatch, server)
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    assert _run(tmp_path / "lost", "away", "--upload-artifacts") == 0
    capsys.readouterr()
    assert cli.main(["rl-harness", "runs", "--store"]) == 0
    assert any(line.split() == ["away", run_helpers.FAKE] for line in capsys.readouterr().out.splitlines())

    here = tmp_path / "here"  # another machine: nothing of the run on it
    assert cli.main(["rl-harness", "fetch", "away", "--records-only", *_roots(here)]) == 0
    assert run_helpers.manifest(here / "r" / "away")["status"] == "completed" and not (here / "a").exists()
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "6")
    with caplog.at_level(logging.INFO):
        assert (
            cli.main(
                [
                    "rl-harness",
                    run_helpers.FAKE,
                    "--run-id",
                    "again",
                    "--resume-from",
                    "away",
                    "--no-upload-artifacts",
                    *_roots(here),
                ]
            )
            == 0
        )
    assert (
        "checkpoint checkpoints/iter_000004 of run away is not on this machine: fetched it from the store"
        in caplog.text
    )
    resumed = here / "a" / "again"
    assert [row["training_iteration"] for row in records.read_json_lines(str(resumed / records.METRICS_FILE))] == [5, 6]
    carried = records.read_json_lines(str(resumed / records.LINEAGE_METRICS_FILE))  # the parent's, from the store
    assert [row["training_iteration"] for row in carried] == [1, 2, 3, 4]  # the curve joins at 4
    fetched = here / "a" / "away" / "checkpoints" / "iter_000004" / "fake_state.json"
    assert (
        fetched.read_bytes()
        == (tmp_path / "lost" / "a" / "away" / "checkpoints" / "iter_000004" / "fake_state.json").read_bytes()
    )

    capsys.readouterr()
    assert cli.main(["rl-harness", "fetch", "away", *_roots(here)]) == 0
    assert "verified by sha256" in capsys.readouterr().out
    original = tmp_path / "lost" / "a" / "away"
    for path in original.rglob("*"):
        if path.is_file():
            assert (here / "a" / "away" / path.relative_to(original)).read_bytes() == path.read_bytes()


def test_a_file_changed_in_the_store_is_not_kept(server, tmp_path, monkeypatch, capsys):
    _environment(monkeypatch, server)
    assert _run(tmp_path / "lost", "tampered", "--upload-artifacts") == 0
    writer = s3_server.reader(server, server.read_write)
    metrics = f"{server.bucket}/lab/{run_helpers.FAKE}/tampered/artifacts/{records.METRICS_FILE}"
    with writer.open_output_stream(metrics) as stream:
        stream.write(b'{"training_iteration": 99}\n' * 20)
    capsys.readouterr()
    assert cli.main(["rl-harness", "fetch", "tampered", *_roots(tmp_path / "here")]) == 3
    assert f"artifacts/{records.METRICS_FILE} in the store does not match its index" in capsys.readouterr().err
    assert not (tmp_path / "here" / "a" / "tampered" / records.METRICS_FILE).exists()


def test_a_study_is_refused_in_one_line_where_the_store_lacks_it_or_holds_another_with_its_id(
    server, tmp_path, monkeypatch, capsys
):
    _environment(monkeypatch, server)
    study = ["rl-harness", "study", "rl.harness.tests.fake_study", *_roots(tmp_path)]
    capsys.readouterr()
    assert cli.main([*study, "--resume", "nowhere"]) == 2
    assert f"no study 'nowhere' under {tmp_path / 'r'} nor in s3://{server.bucket}/lab;" in capsys.readouterr().err
    writer = s3_server.reader(server, server.read_write)
    with writer.open_output_stream(
        f"{server.bucket}/lab/rl.harness.tests.fake_study/studies/taken/results/study.json"
    ) as stream:
        stream.write(b"{}")
    assert cli.main([*study, "--study-id", "taken"]) == 2
    assert "already holds a study's records, which are never overwritten" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_a_member_run_that_began_unseen_keeps_its_id_and_the_member_runs_under_the_next(server, tmp_path, monkeypatch):
    from rl.harness.commands import study as study_command

    _environment(monkeypatch, server)
    # A member's run that sent files but no index before its machine was lost: the study never saw it start.
    writer = s3_server.reader(server, server.read_write)
    with writer.open_output_stream(
        f"{server.bucket}/lab/{run_helpers.FAKE}/unseen-first-s0/results/{records.MANIFEST_FILE}"
    ) as stream:
        stream.write(b"{}")
    _, options = cli.parse(
        ["rl-harness", "study", "rl.harness.tests.fake_study", "--study-id", "unseen", *_roots(tmp_path)]
    )
    trials = study_command.StudyCommand(options)._plan()
    assert [trial.run_id for trial in trials] == [
        "unseen-first-s0-a2",
        "unseen-second-s0",
        "unseen-first-s1",
        "unseen-second-s1",
    ]
    assert all("--upload-artifacts" in trial.argv for trial in trials)
