"""An Algorithm's log folder goes into the run's artifacts, not ~/ray_results: with a read-only home (a real
read-only mount) a Trainable built outside Tune still starts, and nothing is written under the home."""

import os
import subprocess
import sys
import textwrap

from rl.harness.tests import mounts, run_helpers

# Ray's Trainable is the base of every RLlib Algorithm; no ray.init is needed to build this one.
BUILD_A_TRAINABLE = textwrap.dedent("""
    import pathlib, sys
    from ray.tune import Trainable
    from rl.harness.training import ray_folders

    class Tiny(Trainable):
        def setup(self, config):
            pass

        def step(self):
            return {}

    with ray_folders.logs_under(pathlib.Path(sys.argv[1])):
        tiny = Tiny()
    print(tiny.logdir)
    tiny.stop()
""")


def _build(home, artifacts, *args):
    """A fresh interpreter (Ray reads the home once, at import) with HOME=`home`."""
    return subprocess.run(
        [sys.executable, "-c", BUILD_A_TRAINABLE, str(artifacts), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=run_helpers.child_env(HOME=home),
        check=False,
    )


def test_with_a_read_only_home_the_log_folder_is_in_the_artifacts_and_the_home_stays_empty(tmp_path):
    artifacts = tmp_path / "artifacts" / "run" / "ray_logs"
    with mounts.read_only(tmp_path / "home"):
        done = _build(tmp_path / "home", artifacts)
        assert done.returncode == 0, done.stderr[-3000:]
        assert os.listdir(tmp_path / "home") == []
    assert os.path.dirname(done.stdout.strip().splitlines()[-1]) == str(artifacts)
