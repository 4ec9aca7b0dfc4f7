"""Slow: the next-token reference's `--smoke` trains, probes at steps 0 and 60 and records everything (~20 s)."""

import json

from experiments.common import smoke
from experiments.mess3.checks import next_token_reference as recipe

LAYERS = ["residual_0", "residual_1", "residual_2", "residual_3", "residual_4"]  # the projected input, 4 blocks


def test_the_smoke_run_trains_probes_and_scores_against_the_optimum(tmp_path):
    run = smoke.run_smoke(
        "experiments/mess3/next_token_reference", "experiments.mess3.checks.next_token_reference", tmp_path
    )

    assert run.manifest["status"] == "completed"
    if run.built_with_bazel:
        assert run.manifest["build"]["target"] == "//experiments/mess3:next_token_reference"
    steps = recipe.TRAINING[True].steps
    assert [c["iteration"] for c in run.manifest["checkpoints"]] == [0, steps]
    assert run.metrics()[-1]["next_token/step"] == steps

    reports = json.loads((run.results_dir / recipe.PROBE_REPORT_FILE).read_text())["snapshots"]
    assert [snapshot["training_step"] for snapshot in reports] == [0, steps]
    for snapshot in reports:
        assert snapshot["report"]["distribution"]["kind"] == "uniform_contexts"
        layers = snapshot["report"]["layers"]
        assert [layer["layer"] for layer in layers] == LAYERS
        # Mess3 beliefs are far from constant: any layer beats the mean-belief baseline.
        assert all(layer["test"]["r2"] > layer["baseline"]["r2"] for layer in layers)

    reference = json.loads((run.results_dir / recipe.REFERENCE_FILE).read_text())
    assert [layer["layer"] for layer in reference["probes"]["layers"]] == LAYERS
    for layer in reference["probes"]["layers"]:
        low, high = layer["r2_interval"]
        assert low <= high and -1 < layer["r2"] <= 1
    entropy = reference["cross_entropy_nats"]
    assert len(entropy["model_per_context_length"]) == len(entropy["optimum_per_context_length"]) == 10
    # Cross-entropy = the optimum + a KL divergence >= 0, at every context length (1e-9: float rounding).
    assert all(
        model >= optimum - 1e-9
        for model, optimum in zip(entropy["model_per_context_length"], entropy["optimum_per_context_length"])
    )
    for name in ("probe_r2_uniform_contexts.png", "belief_simplex_uniform_contexts.png", "learning_curves.png"):
        assert (run.artifacts_dir / name).stat().st_size > 0, name
    assert run.summary["outcome"]["final_layer_r2"] == reference["probes"]["layers"][-1]["r2"]
    assert "results: " in run.stdout and smoke.RUN_ID in run.stdout
