"""A SIGINT or SIGTERM while a run probes its checkpoints: the rest is skipped, the run ends interrupted."""

import json
import signal

import pytest

from rl.analysis import probing
from rl.analysis.tests import in_run_probe_recipe
from rl.harness import read_manifest
from rl.harness.commands import cli
from rl.harness.run import records

RUN_ID = "probed"


def _run(tmp_path) -> int:
    return cli.main(
        [
            "rl-harness",
            in_run_probe_recipe.__name__,
            "--results-dir",
            str(tmp_path / "results"),
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
            "--run-id",
            RUN_ID,
        ]
    )


def test_without_a_signal_every_checkpoint_is_probed(tmp_path):
    assert _run(tmp_path) == 0
    summary = json.loads((tmp_path / "results" / RUN_ID / records.SUMMARY_FILE).read_text())
    assert summary["outcome"] == {"probed": in_run_probe_recipe.CHECKPOINTS}


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_probing_skips_the_rest_and_ends_the_run_interrupted(
    tmp_path, monkeypatch, capsys, signal_number
):
    loaded, load = [], probing.load_rl_module

    def load_then_signal(path, module_id):
        loaded.append(path.name)
        if len(loaded) == 1:
            signal.raise_signal(signal_number)  # arrives while the first checkpoint is being probed
        return load(path, module_id)

    monkeypatch.setattr(probing, "load_rl_module", load_then_signal)
    assert _run(tmp_path) == 128 + signal_number
    assert loaded == ["iter_000001"]  # stopped before its first layer; the other checkpoints never loaded
    manifest = read_manifest(tmp_path / "results" / RUN_ID)
    assert (manifest.status, manifest.interrupted_by) == ("interrupted", signal.Signals(signal_number).name)
    assert manifest.error.type == "ProbingStopped"
    assert f"probe them later with `./bazelw run //rl/analysis:probe -- {RUN_ID}`" in capsys.readouterr().out
