"""`rl-harness compare` on fake-recipe runs: the PNG, the final-metrics table, the warnings, bad input."""

import matplotlib.image
import pytest

from rl.harness.commands import cli, compare
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import finder, records
from rl.harness.run.manifest import RunManifest
from rl.harness.tests import run_helpers

LOSS = "fake/loss"


@pytest.fixture
def roots(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "4")
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    for run_id, seed, *extra in (
        ("a", 1),
        ("b", 2),
        ("c", 2),
        ("tiny", 3, "--smoke"),
        ("scaled", 2, "--set", "fake/loss_scale=2"),
    ):
        assert run_helpers.run_fake(results, artifacts, "--run-id", run_id, "--seed", str(seed), *extra) == 0
    return results, artifacts


def _compare(roots, tmp_path, *args):
    return cli.main(
        ["rl-harness", "compare", *args, "--results-dir", str(roots[0]), "--output", str(tmp_path / "curves.png")]
    )


def _last_row(roots, run_id):
    return records.read_json_lines(str(roots[1] / run_id / records.METRICS_FILE))[-1]


def test_compare_draws_one_panel_per_metric_and_tabulates_the_final_metrics(roots, tmp_path, capsys):
    assert _compare(roots, tmp_path, "a", "b", "--metric", LOSS, "--metric", "num_env_steps_sampled_lifetime") == 0
    out, err = capsys.readouterr()
    assert err == ""  # different seeds, all full: nothing to warn about
    height, width, _ = matplotlib.image.imread(tmp_path / "curves.png").shape
    assert (width, height) == (600, 2 * 360)
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines()[:-1]}
    assert table["run"] == ["a", "b"] and table["seed"] == ["1", "2"] and table["budget"] == ["full", "full"]
    assert table["status"] == ["completed", "completed"]
    assert table["num_env_steps_sampled_lifetime"] == ["400", "400"]
    assert table[LOSS] == [f"{_last_row(roots, run_id)[LOSS]:.6g}" for run_id in ("a", "b")]
    assert out.splitlines()[-1] == f"wrote {tmp_path / 'curves.png'}"


def test_compare_warns_once_per_repeated_seed_and_on_smoke_beside_full(roots, tmp_path, capsys):
    assert _compare(roots, tmp_path, "a", "b", "c", "tiny", "--metric", LOSS) == 0
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith("warning: runs b, c of one recipe and settings share seed 2")
    assert warnings[1].startswith("warning: smoke runs (tiny) beside full runs (a, b, c)")


def test_agents_trained_from_one_seed_are_a_paired_design_not_a_repeat(roots):
    b, scaled = (finder.find_run(run_id, [str(roots[0])]) for run_id in ("b", "scaled"))
    record = b.manifest.to_dict()
    record["experiment"]["module"] = "rl.harness.tests.another_recipe"
    other_recipe = finder.Run(b.run_dir, RunManifest.from_dict(record))
    assert compare.warnings([b, scaled]) == []  # one recipe, other --set: another agent
    assert compare.warnings([b, other_recipe]) == []
    assert compare.warnings([b, scaled, finder.find_run("c", [str(roots[0])])])[0].startswith("warning: runs b, c ")


def test_a_one_point_curve_is_a_marker_and_a_curve_without_values_is_named(roots, tmp_path, capsys):
    assert (
        cli.main(
            [
                "rl-harness",
                run_helpers.FAKE,
                "--results-dir",
                str(roots[0]),
                "--artifacts-dir",
                str(roots[1]),
                "--run-id",
                "one",
                "--seed",
                "5",
                "--set",
                "fake/iterations=1",
            ]
        )
        == 0
    )
    summary_path = roots[0] / "c" / records.SUMMARY_FILE
    summary = records.read_json(str(summary_path), "summary")
    summary["metrics"][LOSS]["curve"] = [[x, None] for x, _ in summary["metrics"][LOSS]["curve"]]
    records.write_json_atomically(str(summary_path), summary)
    runs = [finder.find_run(run_id, [str(roots[0])]) for run_id in ("one", "a", "c")]
    drawn = compare.figure(runs, [LOSS]).axes[0]
    assert [(line.get_label(), line.get_marker()) for line in drawn.lines] == [
        ("one (seed 5)", "o"),
        ("a (seed 1)", "None"),
    ]
    capsys.readouterr()
    assert _compare(roots, tmp_path, "one", "a", "c", "--metric", LOSS) == 0
    assert capsys.readouterr().err == f"note: no curve of {LOSS} for c (seed 2): no finite value was summarised\n"
    nothing = compare.figure(runs[2:], [LOSS]).axes[0]
    assert not nothing.lines and nothing.texts[0].get_text() == f"no run has a finite value of {LOSS}"


@pytest.mark.parametrize(
    "args, problem",
    [
        (["a", "nope", "--metric", LOSS], "no run 'nope'"),
        (["a", "b", "--metric", "no/such"], "no run summarises no/such"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_writes_no_png(roots, tmp_path, capsys, args, problem):
    assert _compare(roots, tmp_path, *args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err
    assert not (tmp_path / "curves.png").exists()


def test_without_output_the_figure_goes_under_the_results_tree_not_where_the_command_was_typed(
    roots, tmp_path, capsys, monkeypatch
):
    typed_in = tmp_path / "checkout"
    typed_in.mkdir()
    monkeypatch.chdir(typed_in)
    assert cli.main(["rl-harness", "compare", "a", "tiny", "--metric", LOSS, "--results-dir", str(roots[0])]) == 0
    figure = roots[0] / "comparisons" / "a_vs_tiny.png"
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {figure}"
    assert matplotlib.image.imread(figure).shape[:2] == (360, 600)
    assert list(typed_in.iterdir()) == []  # the checkout stays clean for the next run's provenance


def test_outputs_never_show_in_git_status_only_the_results_to_commit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    repo = run_helpers.committed_repo(tmp_path / "repo", {"README.md": "a checkout\n"})
    monkeypatch.chdir(repo)  # relative --results-dir and --artifacts-dir, as a user types them
    for run_id, seed in (("a", "1"), ("b", "2")):
        assert (
            cli.main(
                [
                    "rl-harness",
                    run_helpers.FAKE,
                    "--results-dir",
                    "myres",
                    "--artifacts-dir",
                    "myart",
                    "--run-id",
                    run_id,
                    "--seed",
                    seed,
                ]
            )
            == 0
        )
    assert (
        cli.main(["rl-harness", "compare", "a", "b", "--results-dir", "myres", "--metric", LOSS]) == 0
    )  # default output
    assert "wrote " + str(repo / "myres" / "comparisons" / "a_vs_b.png") in capsys.readouterr().out
    listed = run_helpers.git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    shown = {line[3:] for line in listed}  # the runs' records (a patch too while this checkout has changes)
    assert {
        f"myres/{run_id}/{name}" for run_id in ("a", "b") for name in (records.MANIFEST_FILE, records.SUMMARY_FILE)
    } <= shown and all(path.startswith(("myres/a/", "myres/b/")) for path in shown), shown
