"""experiments_template/ works as a separate repository built against this checkout.

A nested Bazel (own output root) builds the template with RL_HARNESS_LOCAL_PATH
pointing at this checkout and runs its example experiment with --smoke; the run's
manifest must record the library revision it was built against.
"""

import json
import os
import pathlib
import pwd
import shutil
import subprocess

RUNFILES = pathlib.Path(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
# The runfile is a symlink into the source tree: its real path locates the checkout.
CHECKOUT = pathlib.Path(os.path.realpath(RUNFILES / "WORKSPACE.bazel")).parent
TMP = pathlib.Path(os.environ["TEST_TMPDIR"])


def _git(*args):
    return subprocess.run(
        ["git", "-C", str(CHECKOUT), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _interpreter():
    identity_files = list(pathlib.Path(os.environ["TEST_SRCDIR"]).glob("*rl_python*/identity.json"))
    assert identity_files, "the test depends on @rl_python//:identity.json through rl_py_test"
    return json.loads(identity_files[0].read_text())["executable"]


def test_template_builds_against_this_checkout_and_records_the_library_revision():
    workspace = TMP / "my_experiments"
    shutil.copytree(CHECKOUT / "experiments_template", workspace, symlinks=True)
    # A clean environment, as a user's shell would have: the outer test's PYTHONPATH and
    # runfiles variables would make the nested binary import this test's copy of the library.
    env = {
        name: value
        for name, value in os.environ.items()
        if name in ("PATH", "LANG", "USER", "OMP_NUM_THREADS") or name.startswith("PIP_")
    }
    env.update(
        RL_HARNESS_LOCAL_PATH=str(CHECKOUT),
        RL_PYTHON=_interpreter(),
        # The user's real home: pip's user config (find-links) and download cache live there.
        HOME=pwd.getpwuid(os.getuid()).pw_dir,
    )
    bazel = ["bazel", f"--output_user_root={TMP / 'bazel'}"]
    try:
        completed = subprocess.run(
            [*bazel, "run", "//my_experiments/belief_control:ppo", "--", "--smoke"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr[-6000:]
        # The README's test command: the template ships a test of its own.
        tested = subprocess.run(
            [*bazel, "test", "//my_experiments/..."],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert tested.returncode == 0 and "1 test passes" in tested.stdout + tested.stderr, tested.stderr[-6000:]
    finally:
        subprocess.run([*bazel, "shutdown"], cwd=workspace, env=env, capture_output=True, timeout=120, check=False)

    manifests = list((workspace / "my_experiments/belief_control/results/smoke").glob("*/run_manifest.json"))
    assert len(manifests) == 1, manifests
    manifest = json.loads(manifests[0].read_text())
    assert manifest["status"] == "completed"
    library = manifest["code"]["library"]
    assert library["commit"] == _git("rev-parse", "HEAD")
    assert library["root"] == str(CHECKOUT)
    assert manifest["build"]["library"]["external"] is True
    assert manifest["build"]["library"]["local_checkout"] == str(CHECKOUT)
    assert manifest["build"]["built_with_bazel"] and len(manifest["build"]["build_hash"]) == 64
