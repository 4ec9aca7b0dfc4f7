"""Plots render to PNG; they refuse inputs they cannot draw honestly."""

import io

import numpy as np
import pytest

from rl.analysis.plots import belief_simplex_figure, learning_curves_figure, probe_r2_figure, save_figure
from rl.analysis.probes import ProbeDataset, ProbeOptions, SamplingDistribution, probe_layers
from rl.analysis.scores import ScoreScale
from rl.harness.run import records

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
UNIFORM = SamplingDistribution.uniform_contexts(process="p", num_tokens=3, max_length=5, group_prefix_length=2)


def _report(signal: float):
    rng = np.random.default_rng(0)
    beliefs = rng.dirichlet(np.ones(3), size=2000)
    activations = {
        "layer_0": signal * beliefs @ rng.normal(size=(3, 8)) + rng.normal(size=(2000, 8)),
        "layer_1": 2 * signal * beliefs @ rng.normal(size=(3, 8)) + rng.normal(size=(2000, 8)),
    }
    dataset = ProbeDataset(activations, beliefs, np.repeat(np.arange(100), 20), UNIFORM, "belief")
    return probe_layers(
        dataset, seed=np.random.SeedSequence(0), options=ProbeOptions(num_permutations=5, num_bootstrap=200)
    )


def test_learning_curves_from_a_metrics_file(tmp_path):
    path = str(tmp_path / records.METRICS_FILE)
    with records.JsonLinesWriter(path) as writer:
        for iteration in range(1, 6):
            writer.append(
                {
                    "training_iteration": iteration,
                    "num_env_steps_sampled_lifetime": 400 * iteration,
                    "env_runners": {"episode_return_mean": 10.0 * iteration},
                }
            )
    rows = records.read_json_lines(path)
    figure = learning_curves_figure(rows, x="num_env_steps_sampled_lifetime", ys=["env_runners/episode_return_mean"])
    save_figure(figure, str(tmp_path / "curves.png"))
    assert (tmp_path / "curves.png").read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(KeyError, match="env_runners/episode_return_mean"):
        learning_curves_figure(rows, x="num_env_steps_sampled_lifetime", ys=["episode_return_mean"])

    scale = ScoreScale(zero=10.0, one=50.0, zero_name="memoryless", one_name="belief-optimal")
    scored = learning_curves_figure(
        rows,
        x="num_env_steps_sampled_lifetime",
        ys=["env_runners/episode_return_mean"],
        scales={"env_runners/episode_return_mean": scale},
    )
    (axes,) = [a for a in scored.axes if a.get_ylabel() == "env_runners/episode_return_mean"]
    assert sorted(line.get_ydata()[0] for line in axes.get_lines()[1:]) == [10.0, 50.0]  # the reference lines
    (right,) = axes.child_axes
    assert right.get_ylabel() == "normalised"
    # returns 10..50 lie within the references: the axis spans them plus a 10 % margin of the span (4)
    assert axes.get_ylim() == pytest.approx((6.0, 54.0))
    outlier = [{"num_env_steps_sampled_lifetime": 1, "env_runners": {"episode_return_mean": -1000.0}}] + list(rows)
    clipped = learning_curves_figure(
        outlier,
        x="num_env_steps_sampled_lifetime",
        ys=["env_runners/episode_return_mean"],
        scales={"env_runners/episode_return_mean": scale},
    )
    # at most 3 spans (3 x 40) below the zero reference (10), minus the margin
    assert clipped.axes[0].get_ylim()[0] == pytest.approx(10.0 - 120.0 - 4.0)
    with pytest.raises(KeyError, match="not among the plotted metrics"):
        learning_curves_figure(
            rows, x="num_env_steps_sampled_lifetime", ys=["env_runners/episode_return_mean"], scales={"other": scale}
        )


def test_probe_r2_across_checkpoints(tmp_path):
    reports = [(step, _report(signal)) for step, signal in ((1000, 0.5), (2000, 1.0), (3000, 2.0))]
    save_figure(probe_r2_figure(reports, x_label="env steps"), str(tmp_path / "r2.png"))
    assert (tmp_path / "r2.png").read_bytes().startswith(PNG_MAGIC)


def test_simplex_figure_checks_shapes(tmp_path):
    beliefs = np.random.default_rng(0).dirichlet(np.ones(3), size=50)
    buffer = io.BytesIO()
    belief_simplex_figure(beliefs, predicted=beliefs + 0.01).savefig(buffer, format="png")
    assert buffer.getvalue().startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="three states"):
        belief_simplex_figure(np.ones((5, 4)) / 4)
    with pytest.raises(ValueError, match="row for row"):
        belief_simplex_figure(beliefs, predicted=beliefs[:10])
