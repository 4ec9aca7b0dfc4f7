"""Entry point of every rl_py_test: runs pytest on the files Bazel passes as arguments.

Results go to Bazel's junit XML; pytest's own lines land in bazel-testlogs/<pkg>/<name>/test.log.

pytest's temporary folders (`tmp_path`) go under $TEST_TMPDIR. Before pytest starts, it checks
that the runfiles hold every package's `__init__.py`: Bazel creates none
(`--incompatible_default_to_explicit_init_py`, `legacy_create_init = False`), so each must
travel in a `py_library` the test depends on. A missing one would turn its package into a
namespace package, which loses the package's exports (or renames test modules under pytest).
This file imports nothing first-party, so other repositories' tests run it too. A test declared
with `venv = "devops"` is handed to that venv's python first.
"""

import os
import sys

# A test declared with `venv = ...` (tools/rules/defs.bzl) runs with that venv's python: this file
# hands over to it before pytest is imported, the same files on the path.
_PYTHON_FILE = os.environ.pop("RL_VENV_PYTHON_FILE", None)
if _PYTHON_FILE and __name__ == "__main__":
    with open(_PYTHON_FILE) as _handle:
        _PYTHON = _handle.read().strip()
    os.execv(_PYTHON, [_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])

import pytest


def _source_root(runfile: str, relative: str) -> str | None:
    """The folder that holds `relative` in the source tree `runfile` links to, if any."""
    real = os.path.realpath(runfile)
    suffix = os.sep + relative
    if real == runfile or not real.endswith(suffix):
        return None
    return real[: -len(suffix)]


def undeclared_package_inits(runfiles_root: str, script: str) -> list[str]:
    """`<repository>/<package>/__init__.py` paths the sources have and `runfiles_root` lacks.

    `script` (this file, run as a script and never imported) needs no packages.
    """
    script = os.path.realpath(script)
    missing = set()
    for repository in sorted(os.listdir(runfiles_root)):
        repository_root = os.path.join(runfiles_root, repository)
        if not os.path.isdir(repository_root):
            continue
        for folder, _, files in os.walk(repository_root):
            for name in files:
                if not name.endswith(".py"):
                    continue
                relative = os.path.relpath(os.path.join(folder, name), repository_root)
                source_root = _source_root(os.path.join(folder, name), relative)
                if source_root is None or os.path.realpath(os.path.join(folder, name)) == script:
                    continue
                package = os.path.dirname(relative)
                while package:
                    init = os.path.join(package, "__init__.py")
                    if os.path.isfile(os.path.join(source_root, init)) and not os.path.exists(
                        os.path.join(repository_root, init)
                    ):
                        missing.add(os.path.join(repository, init))
                    package = os.path.dirname(package)
    return sorted(missing)


def main() -> int:
    missing = undeclared_package_inits(os.environ["TEST_SRCDIR"], __file__) if "TEST_SRCDIR" in os.environ else []
    if missing:
        print(
            f"pytest_main: {', '.join(missing)} missing from this test's runfiles (Bazel adds no "
            "__init__.py): add the py_library that holds each to the test's deps",
            file=sys.stderr,
        )
        return 2
    args = [
        *sys.argv[1:],
        "-p",
        "no:cacheprovider",
        "-q",
        "-ra",
        # Tests that train or start Ray carry it (their Bazel targets are tagged `slow` too).
        "-o",
        "markers=slow: trains agents or starts Ray; minutes, not seconds",
    ]
    if "TEST_TMPDIR" in os.environ:
        # tmp_path under the test's own temporary folder, which Bazel empties and no other test
        # shares, not under the system temp folder.
        args += ["--basetemp", os.path.join(os.environ["TEST_TMPDIR"], "pytest")]
    xml_output = os.environ.get("XML_OUTPUT_FILE")
    if xml_output:
        args += ["--junitxml", xml_output]
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main())
