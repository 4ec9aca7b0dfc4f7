"""Every run manifest committed under experiments/mess3 reads with today's record types.

The manifests were written by earlier harnesses (schemas 1 to 3) under the names their runner
records had then; the record names nothing but its `kind`, so each must still read, its runner
section typed by that kind.
"""

import json
import pathlib

import pytest

from rl.harness.run import manifest

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent
_COMMITTED = sorted(_PACKAGE.glob("**/results/**/run_manifest.json"))
_TYPED = {
    "direct": manifest.DirectRunnerRecord,
    "tune": manifest.TuneRunnerRecord,
    "agents in turn": manifest.AgentsInTurnRunnerRecord,
}


def test_the_committed_runs_are_here():
    assert len(_COMMITTED) >= 200  # this package's committed results (mess3 runs and checks)


@pytest.mark.parametrize("path", _COMMITTED, ids=lambda path: path.parent.name)
def test_a_committed_manifest_reads_its_runner_record_by_kind(path):
    written = json.loads(path.read_text())
    read = manifest.read_manifest(path.parent)
    kind = (written.get("runner") or {}).get("kind")
    if kind is None:
        assert read.runner is None
        return
    assert isinstance(read.runner, _TYPED.get(kind, manifest.OwnLoopRunnerRecord))
    assert manifest.runner_kind(read.runner) == kind
    assert manifest.runner_to_dict(read.runner) == written["runner"]
