"""stages.run's stages around a stop request (no training: the stage functions are stand-ins)."""

import types

from experiments.mess3.task import stages


_CONFIG = types.SimpleNamespace(env_config={})


def _context(stop_requested: bool):
    return types.SimpleNamespace(run_id="r1", smoke=True, results_dir="results/r1",
                                 recorder=types.SimpleNamespace(stop_requested=stop_requested),
                                 metrics=lambda: [{"training_iteration": 1}])


def test_a_stop_during_training_skips_scoring_and_probing_and_names_the_probe_command(monkeypatch, capsys):
    analysed = []
    monkeypatch.setattr(stages, "train", lambda context, config, env_steps: {"env_steps": env_steps})
    monkeypatch.setattr(stages.control_scores, "score_run", lambda context, rows, env_config: analysed.append("scores"))
    outcome = stages.run(_context(stop_requested=True), config=_CONFIG, budget=stages.MAIN_JOB, random_network=None)
    assert outcome == {"env_steps": stages.MAIN_JOB.smoke_env_steps} and analysed == []
    assert "bazel run //rl/analysis:probe -- r1" in capsys.readouterr().out


def test_without_a_stop_the_scores_see_the_rows_read_once(monkeypatch):
    seen = []
    monkeypatch.setattr(stages, "train", lambda context, config, env_steps: {"env_steps": env_steps})
    monkeypatch.setattr(stages.control_scores, "score_run", lambda context, rows, env_config: seen.append(rows) or {"value": 1})
    outcome = stages.run(_context(stop_requested=False), config=_CONFIG, budget=stages.MAIN_JOB, random_network=None)
    assert outcome["scores"] == {"value": 1} and seen == [[{"training_iteration": 1}]]
