"""A mirror killed with SIGKILL mid-pass, between a record's new copy and the index: what it left in a real
S3-compatible server (moto's) is still fetched verified, the record's newer copy included."""

import json
import os
import subprocess
import sys

from rl.harness.remote import stores
from rl.harness.remote.run_fetch import RemoteRun
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.tests import s3_server

# The mirror's process: one full pass, then the manifest replaced and a second pass killed right after the
# manifest's new copy reached the store (before the index that lists it).
_MIRROR_KILLED_MID_PASS = """
import os, pathlib, signal, sys
from rl.harness.remote import run_mirror, stores
from rl.harness.run import records
from rl.harness.run.layout import RunLayout

layout = RunLayout(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), "cut1", False)
store = stores.open_store(stores.load())
mirror = run_mirror.RunMirror(store, layout, "tests.cut")
mirror.send_pending()
records.write_json_atomically(str(layout.results_dir / records.MANIFEST_FILE), {"status": "running", "heartbeat": 2})
with open(layout.artifacts_dir / records.METRICS_FILE, "a") as metrics:
    metrics.write('{"training_iteration": 2}\\n')
put_bytes = store.put_bytes

def killed_after_the_manifest(data, key, **options):
    put_bytes(data, key, **options)
    if key.endswith("/results/" + records.MANIFEST_FILE):
        os.kill(os.getpid(), signal.SIGKILL)

store.put_bytes = killed_after_the_manifest
mirror.send_pending()
"""


def test_a_mirror_killed_between_a_records_new_copy_and_the_index_leaves_a_run_that_fetches(tmp_path, monkeypatch):
    with s3_server.S3Server() as server:
        variables = {
            **server.store_env(),
        }
        lost = RunLayout(tmp_path / "lost" / "r", tmp_path / "lost" / "a", "cut1", False)
        lost.results_dir.mkdir(parents=True)
        lost.artifacts_dir.mkdir(parents=True)
        records.write_json_atomically(
            str(lost.results_dir / records.MANIFEST_FILE), {"status": "running", "heartbeat": 1}
        )
        (lost.artifacts_dir / records.METRICS_FILE).write_text('{"training_iteration": 1}\n')
        done = subprocess.run(
            [sys.executable, "-c", _MIRROR_KILLED_MID_PASS, str(lost.results_root), str(lost.artifacts_root)],
            env={**os.environ, **variables, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == -9, done.stderr[-3000:]

        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        remote = RemoteRun.find(stores.open_store(stores.load()), "cut1")
        indexed = {entry["local"]: entry for entry in remote.entries()}
        assert "replacement" in indexed[f"results/{records.MANIFEST_FILE}"]  # announced before it was sent
        here = RunLayout(tmp_path / "here" / "r", tmp_path / "here" / "a", "cut1", False)
        remote.fetch(here)
    assert json.loads((here.results_dir / records.MANIFEST_FILE).read_text()) == {"status": "running", "heartbeat": 2}
    assert (here.artifacts_dir / records.METRICS_FILE).read_text() in (
        '{"training_iteration": 1}\n',
        '{"training_iteration": 1}\n{"training_iteration": 2}\n',
    )
