"""seed_summary: figures over seeds from results folders, checked against hand-computed intervals."""

import json

import pytest

from experiments.mess3 import seed_summary

# Three seeds' normalised values 0.2, 0.4, 0.6: mean 0.4, sample sd 0.2, stderr 0.2 / sqrt(3) = 0.11547,
# Student t(0.975, 2 dof) = 4.3027, so the 95 % interval is 0.4 +- 0.4968.
VALUES = (0.2, 0.4, 0.6)
HALF_WIDTH = 4.3027 * 0.2 / 3**0.5


def _figure(mean):
    return {"mean": mean, "low": mean - 0.01, "high": mean + 0.01}


def _fake_run(folder, normalised_value, *, probes):
    folder.mkdir(parents=True)
    evaluation = {"value": _figure(3.4), "normalised_value": _figure(normalised_value),
                  "episode_return": _figure(30.0), "normalised_episode_return": _figure(0.9)}
    (folder / "control_scores.json").write_text(json.dumps({
        "evaluation": {"greedy": evaluation, "sampled": evaluation},
        "training": {"final_return": _figure(29.0)}}))
    if probes:
        layer = {"trained_r2": 0.9 + normalised_value / 10, "random_r2": [0.8, 0.82]}
        (folder / "belief_geometry.json").write_text(json.dumps(
            {"distributions": {"uniform_contexts": {"layers": {"residual_0": layer}}}}))
    return folder


def test_scores_and_probes_are_summarised_over_seeds(tmp_path):
    groups = {"reward_only": [_fake_run(tmp_path / f"r{i}", v, probes=True) for i, v in enumerate(VALUES)],
              "memoryless_agent": [_fake_run(tmp_path / f"m{i}", -v, probes=False) for i, v in enumerate(VALUES)]}
    summary = seed_summary.summarise(groups)
    value = summary["reward_only"]["scores"]["normalised_value (greedy)"]
    assert value["mean"] == pytest.approx(0.4) and value["high"] - value["mean"] == pytest.approx(HALF_WIDTH, abs=1e-3)
    assert value["values"] == list(VALUES)
    # return 30.0 on the gamma-1 scale: (30 - 35.2595) / (35.9129 - 35.2595) = -8.05 (rl/envs/README.md)
    assert summary["reward_only"]["scores"]["return on the gamma-1 scale (greedy)"]["mean"] == pytest.approx(-8.05, abs=0.01)
    assert summary["memoryless_agent"]["scores"]["normalised_value (greedy)"]["mean"] == pytest.approx(-0.4)
    assert "probes" not in summary["memoryless_agent"]  # an MLP run has no belief_geometry.json
    layer = summary["reward_only"]["probes"]["uniform_contexts"]["residual_0"]
    assert layer["trained"]["mean"] == pytest.approx(0.94)
    assert layer["random"]["n"] == 6 and layer["random"]["mean"] == pytest.approx(0.81)  # 2 networks x 3 runs
    text = seed_summary.markdown(summary)
    assert "| reward_only | 3 | 0.400 [" in text and "| residual_0 | 0.940 [" in text
    assert seed_summary.scores_figure(summary).axes  # renders


def test_a_group_needs_runs(tmp_path):
    with pytest.raises(SystemExit, match="is not agent=<run-id>"):
        seed_summary.main(["reward_only", "--results-dir", str(tmp_path)])
