"""tools/workspace_status.sh: run outputs (results/, artifacts/) never make the stamped tree dirty."""

import os
import pathlib
import subprocess

SCRIPT = pathlib.Path(
    os.environ.get("TEST_SRCDIR", "."), os.environ.get("TEST_WORKSPACE", "rl_harness"), "tools", "workspace_status.sh"
)


def _status(repo: pathlib.Path) -> dict:
    out = subprocess.run(["bash", str(SCRIPT.resolve())], cwd=repo, check=True, capture_output=True, text=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_outputs_leave_the_tree_clean_and_sources_do_not(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q", str(tmp_path)], check=True)
    subprocess.run(git + ["-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    for output in ("experiments/x/results/run/summary.json", "experiments/x/artifacts/run/metrics.jsonl"):
        (tmp_path / output).parent.mkdir(parents=True)
        (tmp_path / output).write_text("{}")
    assert _status(tmp_path)["STABLE_GIT_DIRTY"] == "false"
    (tmp_path / "recipe.py").write_text("print(1)\n")
    assert _status(tmp_path)["STABLE_GIT_DIRTY"] == "true"
