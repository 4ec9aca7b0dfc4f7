"""RunLayout: the one rule for `[smoke/]<run-id>` folders, and reading it back from a recorded run."""

import pytest

from rl.harness.run import records
from rl.harness.run.layout import RunLayout, iter_run_dirs, run_folder_part
from rl.harness.run.manifest import MANIFEST_SCHEMA_VERSION, RunManifest


def _manifest(run_id, smoke, artifacts=None) -> RunManifest:
    return RunManifest.from_dict(
        {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "run_id": run_id,
            "options": {"smoke": smoke} if smoke is not None else {},
            "paths": {"artifacts": artifacts} if artifacts else {},
        }
    )


@pytest.mark.parametrize("smoke, relative", [(False, "r1"), (True, "smoke/r1")])
def test_folders_of_a_run(tmp_path, smoke, relative):
    layout = RunLayout(tmp_path / "results", tmp_path / "artifacts", "r1", smoke)
    assert layout.results_dir == tmp_path / "results" / relative
    assert layout.artifacts_dir == tmp_path / "artifacts" / relative
    assert layout.checkpoints_dir == tmp_path / "artifacts" / relative / "checkpoints"
    assert layout.with_run_id("r2").results_dir == tmp_path / "results" / relative.replace("r1", "r2")
    assert layout.remote_prefix("/lab/", "experiments.x.y") == f"lab/experiments.x.y/{relative}"


def test_of_run_never_follows_the_recorded_artifacts_folder(tmp_path):
    results_dir = tmp_path / "results" / "smoke" / "r1"
    results_dir.mkdir(parents=True)
    recorded = tmp_path / "elsewhere" / "smoke" / "r1"  # a shared record may name any folder, a planted one too
    layout = RunLayout.of_run(results_dir, _manifest("r1", True, str(recorded)))
    assert (layout.results_root, layout.artifacts_root, layout.smoke) == (
        tmp_path / "results",
        tmp_path / "artifacts",
        True,
    )
    assert layout.recorded_elsewhere(_manifest("r1", True, str(recorded))) == recorded
    assert layout.recorded_elsewhere(_manifest("r1", True, str(tmp_path / "artifacts" / "smoke" / "r1"))) is None
    # a root the user gives wins
    explicit = RunLayout.of_run(results_dir, _manifest("r1", True, str(recorded)), artifacts_root=tmp_path / "mine")
    assert explicit.artifacts_dir == tmp_path / "mine" / "smoke" / "r1"


def test_a_folder_named_smoke_does_not_make_a_run_a_smoke_run(tmp_path):
    results_dir = tmp_path / "results" / "smoke" / "r1"  # a full run's records under a folder that happens to be smoke/
    layout = RunLayout.of_run(results_dir, _manifest("r1", False))
    assert (layout.results_root, layout.smoke) == (tmp_path / "results" / "smoke", False)
    with pytest.raises(records.RecordError, match="does not end in smoke/r1"):
        RunLayout.of_run(tmp_path / "results" / "r1", _manifest("r1", True))
    with pytest.raises(records.RecordError, match="records no options.smoke"):
        RunLayout.of_run(results_dir, _manifest("r1", None))
    with pytest.raises(records.RecordError, match="records no valid run_id"):
        RunLayout.of_run(results_dir, _manifest(None, False))


def test_artifact_places_best_first_without_repeats(tmp_path):
    layout = RunLayout(tmp_path / "x" / "results", tmp_path / "a", "r1", False)
    places = layout.artifact_places(
        _manifest("r1", False, str(tmp_path / "planted" / "r1")), extra_roots=[tmp_path / "b"]
    )
    assert places == [tmp_path / "a" / "r1", tmp_path / "x" / "artifacts" / "r1", tmp_path / "b" / "r1"]


def test_find_and_iter_run_dirs(tmp_path):
    for relative in ("r1", "smoke/r2", "no_manifest"):
        (tmp_path / relative).mkdir(parents=True)
        if relative != "no_manifest":
            (tmp_path / relative / records.MANIFEST_FILE).write_text("{}")
    assert list(iter_run_dirs(str(tmp_path))) == [str(tmp_path / "r1"), str(tmp_path / "smoke" / "r2")]
    assert RunLayout.find(tmp_path, "r2") == tmp_path / "smoke" / "r2"
    assert RunLayout.find(tmp_path, "no_manifest") is None


@pytest.mark.parametrize(
    "path, part",
    [
        ("results/r1/summary.json", ("results", "summary.json")),
        ("artifacts/smoke/r1/checkpoints/iter_000001/a", ("artifacts", "checkpoints/iter_000001/a")),
        ("results/r2/summary.json", None),
        ("results/r1", None),
        ("results/other/r1/x", None),
    ],
)
def test_run_folder_part(path, part):
    assert run_folder_part(path, "r1") == part
