"""stages.run's stages around a stop request (no training: the stage functions are stand-ins)."""

import types

import pytest

from experiments.mess3.task import stages
from rl.harness.run import records
from rl.harness.tests import mounts

_CONFIG = types.SimpleNamespace(env_config={})


def _context(stop_requested: bool, stop_signal=None):
    """A context whose recorder stopped training (`stop_requested`), by a signal or else by the --stop-at-* cap."""
    return types.SimpleNamespace(
        run_id="r1",
        smoke=True,
        results_dir="results/r1",
        recorder=types.SimpleNamespace(stop_requested=stop_requested, stop_signal=stop_signal),
        metrics=lambda: [{"training_iteration": 1}],
    )


def test_a_stop_during_training_skips_scoring_and_probing_and_names_the_probe_command(monkeypatch, capsys):
    analysed = []
    monkeypatch.setattr(stages, "train", lambda context, config, env_steps: {"env_steps": env_steps})
    monkeypatch.setattr(stages.control_scores, "score_run", lambda context, rows, env_config: analysed.append("scores"))
    outcome = stages.run(
        _context(stop_requested=True, stop_signal="SIGINT"), config=_CONFIG, budget=stages.MAIN_JOB, random_network=None
    )
    assert outcome == {"env_steps": stages.MAIN_JOB.smoke_env_steps} and analysed == []
    assert "`./bazelw run //rl/analysis:probe -- r1`" in capsys.readouterr().out


@pytest.mark.parametrize("capped", [False, True])
def test_without_a_signal_the_scores_see_the_rows_read_once(monkeypatch, capped):
    seen = []
    monkeypatch.setattr(stages, "train", lambda context, config, env_steps: {"env_steps": env_steps})
    monkeypatch.setattr(
        stages.control_scores, "score_run", lambda context, rows, env_config: seen.append(rows) or {"value": 1}
    )
    outcome = stages.run(_context(stop_requested=capped), config=_CONFIG, budget=stages.MAIN_JOB, random_network=None)
    assert outcome["scores"] == {"value": 1} and seen == [[{"training_iteration": 1}]]


def test_a_full_results_disk_after_training_names_the_probe_command(monkeypatch, capsys, tmp_path):
    def write_report(context, rows, env_config):  # as the scores write theirs: into the run's results folder
        records.write_bytes_atomically(str(tmp_path / "results" / "score_report.json"), bytes(400_000))

    monkeypatch.setattr(stages, "train", lambda context, config, env_steps: {"env_steps": env_steps})
    monkeypatch.setattr(stages.control_scores, "score_run", write_report)
    with mounts.small(tmp_path / "results", "200k"), pytest.raises(OSError, match="No space left on device"):
        stages.run(_context(stop_requested=False), config=_CONFIG, budget=stages.MAIN_JOB, random_network=None)
    assert capsys.readouterr().out == (
        "writing the scores or probes failed (No space left on device); probe the"
        " checkpoints later with `./bazelw run //rl/analysis:probe -- r1`\n"
    )
