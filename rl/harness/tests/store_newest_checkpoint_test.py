"""`--resume-from <run-id>` in a fresh folder takes the newest checkpoint whole in the store, not the one the store's
manifest names when that manifest lags, and never one whose folder the store holds only in part. Against moto's
S3 server: a run mirrored while it trains is killed with SIGKILL; the store is then left with a manifest naming
an older checkpoint, and a newer checkpoint folder without its state file, as a mirror killed mid-pass
leaves them."""

import json
import re
import shutil
import signal

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import run_helpers, s3_server

BUDGET = 16
KILLED_AT = 10  # the fake recipe saves a checkpoint every second iteration
_CHECKPOINT = re.compile(r"/checkpoints/iter_(\d+)/" + re.escape(records.CHECKPOINT_STATE_FILE) + "$")


def _whole_in_store(server) -> list[int]:
    """Iterations of the checkpoints whose state file the store holds (read with another client)."""
    from pyarrow import fs

    listing = s3_server.reader(server).get_file_info(fs.FileSelector(server.bucket, recursive=True))
    return sorted(int(match[1]) for info in listing if (match := _CHECKPOINT.search(info.path)))


def test_resume_takes_the_newest_whole_checkpoint_in_the_store_when_its_manifest_lags(tmp_path):
    with s3_server.S3Server() as server:
        environment = {
            **server.store_env(),
            env_vars.MIRROR_INTERVAL_ENV: "0.2",
            "FAKE_RECIPE_ITERATIONS": BUDGET,
            "FAKE_RECIPE_SLEEP_S": 0.3,
        }
        lost = tmp_path / "lost"
        status, stderr = run_helpers.run_until(
            [run_helpers.FAKE, "--run-id", "lost1", "--upload-artifacts", *run_helpers.store_roots(lost)],
            lambda: len(run_helpers.metrics_rows(lost / "a")) >= KILLED_AT and len(_whole_in_store(server)) >= 3,
            signal.SIGKILL,
            f"iteration {KILLED_AT} and three checkpoints in the store",
            **environment,
        )
        assert status == -signal.SIGKILL, stderr[-3000:]

        # The store's records lag its checkpoints: the manifest there names the oldest checkpoint it holds,
        # and a newer folder is there without its state file (its other files sent, then the kill).
        oldest = _whole_in_store(server)[0]
        manifest_path = lost / "r" / "lost1" / records.MANIFEST_FILE
        manifest = json.loads(manifest_path.read_text())
        manifest["checkpoints"] = [entry for entry in manifest["checkpoints"] if entry["iteration"] <= oldest]
        manifest_path.write_text(json.dumps(manifest))
        checkpoints = lost / "a" / "lost1" / "checkpoints"
        shutil.copytree(
            max(checkpoints.glob("iter_*")),
            checkpoints / "iter_000099",
            ignore=shutil.ignore_patterns(records.CHECKPOINT_STATE_FILE),
        )
        index = lost / "r" / "lost1" / records.REMOTE_ARTIFACTS_FILE
        with s3_server.reader(server).open_input_stream(
            f"{server.bucket}/lab/{run_helpers.FAKE}/lost1/results/{index.name}"
        ) as handle:
            index.write_bytes(handle.read())  # what the killed mirror sent: `sync` keeps it and adds the changes
        status, _, stderr = run_helpers.run_cli(["sync", "lost1", *run_helpers.store_roots(lost)], **environment)
        assert status == 0, stderr[-3000:]
        newest = _whole_in_store(server)[-1]  # the sync sent the checkpoints the killed mirror had not

        clone = tmp_path / "clone"
        status, _, stderr = run_helpers.resume_fake_from("lost1", clone, **environment)
    assert status == 0, stderr[-3000:]
    assert newest > oldest
    fetched = [line for line in stderr.splitlines() if "is not on this machine: fetched it from the store" in line]
    assert len(fetched) == 1, stderr[-3000:]
    assert f"checkpoint checkpoints/iter_{newest:06d} of run lost1" in fetched[0], fetched[0]
    assert f"manifest names checkpoints/iter_{oldest:06d}" in fetched[0], fetched[0]
    carried = [entry["path"] for entry in run_helpers.manifest(clone / "r" / "resumed")["checkpoints"]]
    # the fetched checkpoint is carried as the resumed run's own, then its own follow
    assert carried == [f"checkpoints/iter_{iteration:06d}" for iteration in range(newest, BUDGET + 1, 2)], carried
    own = [row["training_iteration"] for row in run_helpers.metrics_rows(clone / "a")]
    assert own == list(range(newest + 1, BUDGET + 1))
    lineage = [
        row["training_iteration"]
        for row in records.read_json_lines(str(clone / "a" / "resumed" / records.LINEAGE_METRICS_FILE))
    ]
    assert lineage + own == list(range(1, BUDGET + 1))
