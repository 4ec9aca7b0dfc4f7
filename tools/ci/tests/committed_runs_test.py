"""committed_runs: a committed run holds compact records only (a temporary git repository)."""

import subprocess

from rl.harness.run import records
from tools.ci import committed_runs


def _git(folder, *args):
    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def _repo(tmp_path, files):
    repo = tmp_path / "repo"
    for name, size in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "runs")
    return repo


def test_compact_runs_pass_and_figures_or_large_files_in_a_run_are_named(tmp_path):
    big = committed_runs.MAX_FILE_BYTES + 1
    repo = _repo(
        tmp_path,
        {
            "exp/results/r1/run_manifest.json": 100,
            "exp/results/r1/probe_report.json": 1 << 20,
            "exp/results/smoke/r2/run_manifest.json": 100,
            "exp/results/smoke/r2/learning_curves.png": 10,
            "exp/results/smoke/r2/figures/simplex.SVG": 10,
            "exp/results/r3/run_manifest.json": 10,
            "exp/results/r3/activations.json": big,
            "exp/results/studies/s1/curves.png": 10,
            "exp/figures/r1-curves.png": 10,
            "docs/big.bin": big,
        },
    )
    found = committed_runs.problems(str(repo))
    assert [line.split(":")[0] for line in found] == [
        "exp/results/r3/activations.json",
        "exp/results/smoke/r2/figures/simplex.SVG",
        "exp/results/smoke/r2/learning_curves.png",
    ]
    assert "a figure in a committed run" in found[1] and f"{big} bytes" in found[0]
    assert committed_runs.main(["--root", str(repo)]) == 1


def test_a_run_over_its_total_is_named(tmp_path):
    each = committed_runs.MAX_FILE_BYTES
    repo = _repo(
        tmp_path,
        {
            "results/r1/run_manifest.json": 10,
            "results/r1/a.json": each,
            "results/r1/b.json": each,
            "results/r1/c.json": 10,
        },
    )
    assert committed_runs.problems(str(repo)) == [
        (f"results/r1/: {2 * each + 20} bytes, over {committed_runs.MAX_RUN_BYTES} for a committed run")
    ]


def test_the_figures_are_the_harness_outputs_that_go_with_the_artifacts():
    assert records.FIGURE_SUFFIXES == committed_runs.FIGURE_SUFFIXES
