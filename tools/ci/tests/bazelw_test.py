"""`./bazelw` keeps Bazel's output root private: its java.log and command.log hold the client's environment."""

import os
import pathlib
import stat
import subprocess


def _bazelw() -> pathlib.Path:
    return pathlib.Path(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], "bazelw")


def test_bazelw_makes_the_output_root_readable_by_its_user_alone(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bazel", "zip"):  # stand-ins on PATH, so nothing is installed and no server starts
        (tools / name).write_text('#!/bin/sh\necho ran "$@"\n')
        (tools / name).chmod(0o755)
    home = tmp_path / "home"
    output_root = home / ".cache" / "bazel"
    output_root.mkdir(parents=True)
    output_root.chmod(0o755)  # as Bazel leaves it under a usual umask
    done = subprocess.run(
        ["bash", str(_bazelw()), "info"],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(home), "PATH": f"{tools}:/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "ran info"
    assert stat.S_IMODE(output_root.stat().st_mode) == 0o700
