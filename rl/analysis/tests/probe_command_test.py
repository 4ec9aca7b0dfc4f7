"""The probe command on run records (checkpoints of untrained modules: fast)."""

import json

import pytest

from rl.analysis import probe_command, probing
from rl.analysis.checkpoints import find_checkpoints
from rl.analysis.probes import PROCESS_ROLLOUTS, UNIFORM_CONTEXTS, ProbeReport
from rl.analysis.tests import fake_runs, probe_recipe
from rl.analysis.tests.fake_runs import fake_run
from rl.analysis.tests.tiny_modules import tiny_transformer
from rl.harness.run import seeding

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _modules(count):
    return [tiny_transformer(seed) for seed in range(count)]


def test_probes_every_checkpoint_and_writes_report_and_plots(tmp_path, capsys):
    run_id = fake_run(tmp_path / "exp", _modules(2), experiment="rl.analysis.tests.probe_recipe")
    assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--no-progress"]) == 0
    results = tmp_path / "exp" / "results" / run_id
    record = json.loads((results / "probe_report.json").read_text())
    assert [c["name"] for c in record["checkpoints"]] == ["iter_000001", "iter_000002"]
    # by default the run's own probe stream (this fake run drew none: that stream of its root seed)
    default_seed = seeding.SeedStreams(fake_runs.ROOT_SEED).integer("probe")
    assert record["experiment"] == "rl.analysis.tests.probe_recipe" and record["seed"] == default_seed
    assert set(record["seed_streams"]) == {"probe/contexts", "probe/rollouts", "probe/rollout_probes"}
    first, second = (
        [ProbeReport.from_dict(c["reports"][kind]) for kind in (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS)]
        for c in record["checkpoints"]
    )
    assert first[0].split["num_test"] + first[0].split["num_train"] == sum(3**m for m in range(1, 7))
    assert first[1].split["num_test"] + first[1].split["num_train"] == 48 * probe_recipe.HORIZON
    assert [layer.layer for layer in first[0].layers] == ["residual_0", "residual_1", "residual_2"]
    # Paired across checkpoints: the same contexts and splits, different modules.
    assert first[0].split == second[0].split and first[0].layer("residual_2").test != second[0].layer("residual_2").test
    assert first[1].distribution.parameters["policy"].endswith("iter_000001")
    for name in (
        "probe_r2_uniform_contexts.png",
        "probe_r2_process_rollouts.png",
        "belief_simplex_uniform_contexts.png",
        "belief_simplex_process_rollouts.png",
        "learning_curves.png",
    ):
        assert (tmp_path / "exp" / "artifacts" / run_id / name).read_bytes().startswith(PNG_MAGIC), name
        assert not (results / name).exists(), name
    assert "iter_000002 uniform_contexts: best residual_" in capsys.readouterr().out


def test_by_default_the_probes_repeat_the_runs_own_and_seed_overrides(tmp_path):
    run_id = fake_run(tmp_path / "exp", _modules(1), experiment="rl.analysis.tests.probe_recipe", probe_stream=True)
    manifest = json.loads((tmp_path / "exp" / "results" / run_id / "run_manifest.json").read_text())
    report_file = tmp_path / "exp" / "results" / run_id / "probe_report.json"
    assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--no-progress"]) == 0
    default = json.loads(report_file.read_text())
    assert default["seed"] == manifest["seed_streams"]["probe"]["value"]
    assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--no-progress", "--seed", "42"]) == 0
    chosen = json.loads(report_file.read_text())
    assert chosen["seed"] == 42
    assert chosen["checkpoints"][0]["reports"] != default["checkpoints"][0]["reports"]


def test_the_default_command_repeats_the_in_run_probe_of_a_smoke_run(tmp_path):
    run_id = fake_run(
        tmp_path / "exp", _modules(1), experiment="rl.analysis.tests.probe_recipe", probe_stream=True, smoke=True
    )
    found = find_checkpoints(run_id, roots=[str(tmp_path)])
    # what a recipe computes in-run: its smoke plan and the probe stream of the run's seed streams
    in_run = probing.probe_checkpoints(
        found,
        probe_recipe.probe_plan(smoke=True),
        seed=probing.probe_seed(seeding.SeedStreams(fake_runs.ROOT_SEED)),
        module_id="default_policy",
        show_progress=False,
    )
    assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--no-progress"]) == 0
    record = json.loads((tmp_path / "exp" / "results" / "smoke" / run_id / "probe_report.json").read_text())
    expected = json.loads(json.dumps({kind: report.as_dict() for kind, report in in_run[0].reports.items()}))
    assert record["checkpoints"][0]["reports"] == expected
    contexts = expected[UNIFORM_CONTEXTS]["split"]
    assert contexts["num_test"] + contexts["num_train"] == sum(
        3**m for m in range(1, probe_recipe.SMOKE_CONTEXT_LENGTH + 1)
    )


def test_only_the_last_checkpoint(tmp_path):
    run_id = fake_run(tmp_path / "exp", _modules(2), experiment="rl.analysis.tests.probe_recipe")
    assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--checkpoints", "last", "--no-progress"]) == 0
    record = json.loads((tmp_path / "exp" / "results" / run_id / "probe_report.json").read_text())
    assert [c["name"] for c in record["checkpoints"]] == ["iter_000002"]


@pytest.mark.parametrize(
    "experiment, message",
    [
        ("rl.analysis.tests.fake_runs", "defines no probe_plan()"),
        ("rl.analysis.tests.no_such_recipe", "no module named 'rl.analysis.tests.no_such_recipe'"),
    ],
)
def test_bad_runs_exit_2_with_the_fix(tmp_path, capsys, experiment, message, monkeypatch):
    monkeypatch.delenv("BUILD_WORKSPACE_DIRECTORY", raising=False)
    if experiment == "rl.analysis.tests.fake_runs":
        monkeypatch.setattr("rl.analysis.tests.fake_runs.run", lambda context: None, raising=False)
    run_id = fake_run(tmp_path / "exp", _modules(1), experiment=experiment)
    assert probe_command.main([run_id, "--results-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert probe_command.main(["20990101T000000Z-000000", "--results-dir", str(tmp_path)]) == 2
    assert "`python -m rl.harness.commands.cli runs`" in capsys.readouterr().err


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_probing_stops_it_in_one_line_and_writes_nothing(
    tmp_path, capsys, monkeypatch, signal_name, status
):
    import os
    import signal

    run_id = fake_run(tmp_path / "exp", _modules(1), experiment="rl.analysis.tests.probe_recipe")
    results = tmp_path / "exp" / "results" / run_id
    before = sorted(path.name for path in results.iterdir())

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, signal_name))  # as if typed while the first checkpoint is probed
        raise AssertionError("the signal did not stop probing")

    monkeypatch.setattr(probing, "probe_checkpoints", signalled)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--no-progress"]) == status
    finally:
        signal.signal(signal.SIGTERM, previous)
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"probe: {signal_name}: stopped before writing anything" in error[0]
    assert sorted(path.name for path in results.iterdir()) == before


def test_with_progress_each_checkpoint_ends_in_a_line_with_the_stages_count_and_eta(tmp_path, capsys):
    run_id = fake_run(tmp_path / "exp", _modules(2), experiment="rl.analysis.tests.probe_recipe")
    assert probe_command.main([run_id, "--results-dir", str(tmp_path), "--checkpoints", "all"]) == 0
    stage = [line for line in capsys.readouterr().err.splitlines() if line.startswith("probing ")]
    assert [line.split("] ")[1].split()[:2] for line in stage] == [["50%", "1/2"], ["100%", "2/2"]], stage
    assert all(
        line.startswith(f"probing 2 checkpoint(s) of {run_id} [") and line.endswith(" s left") for line in stage
    ), stage
