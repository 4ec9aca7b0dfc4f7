"""pytest_main: its check that a test's runfiles hold every package's `__init__.py`, its tmp_path."""

import os
import pathlib
import subprocess
import sys

from tools.testing import pytest_main
from tools.testing.pytest_main import undeclared_package_inits


def _tree(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _runfiles(tmp_path: pathlib.Path, linked: list[str]) -> pathlib.Path:
    """A runfiles tree of repository `main` whose files link into the source tree `src/`."""
    runfiles = tmp_path / "test.runfiles"
    for name in linked:
        link = runfiles / "main" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(tmp_path / "src" / name)
    return runfiles


SOURCES = {
    "pkg/__init__.py": "from pkg.core import VALUE\n",
    "pkg/core.py": "VALUE = 1\n",
    "pkg/tests/__init__.py": "",
    "pkg/tests/core_test.py": "",
    "scripts/run.py": "",  # a folder without __init__.py: not a package
}


def test_runfiles_with_every_package_init_pass(tmp_path):
    _tree(tmp_path / "src", SOURCES)
    runfiles = _runfiles(tmp_path, list(SOURCES))
    assert undeclared_package_inits(str(runfiles), str(tmp_path / "src/scripts/run.py")) == []


def test_each_package_init_the_sources_have_and_the_runfiles_lack_is_named(tmp_path):
    _tree(tmp_path / "src", SOURCES)
    runfiles = _runfiles(tmp_path, ["pkg/core.py", "pkg/tests/core_test.py", "scripts/run.py"])
    assert undeclared_package_inits(str(runfiles), str(tmp_path / "src/scripts/run.py")) == [
        os.path.join("main", "pkg", "__init__.py"),
        os.path.join("main", "pkg", "tests", "__init__.py"),
    ]


def test_the_script_itself_and_generated_files_need_no_package(tmp_path):
    _tree(tmp_path / "src", SOURCES)
    runfiles = _runfiles(tmp_path, ["pkg/tests/core_test.py"])
    # Generated: a plain file in the runfiles, not a link into the sources.
    _tree(runfiles / "main", {"pkg/generated.py": ""})
    assert undeclared_package_inits(str(runfiles), str(tmp_path / "src/pkg/tests/core_test.py")) == []


def test_tmp_path_lies_under_the_tests_own_temporary_folder(tmp_path):
    (tmp_path / "where_test.py").write_text(
        "import os\n\n"
        "def test_where(tmp_path):\n"
        "    with open(os.environ['REPORT'], 'w') as report:\n"
        "        report.write(str(tmp_path))\n"
    )
    test_tmpdir = tmp_path / "test_tmpdir"
    test_tmpdir.mkdir()
    environment = {name: value for name, value in os.environ.items() if name not in ("TEST_SRCDIR", "XML_OUTPUT_FILE")}
    environment.update(TEST_TMPDIR=str(test_tmpdir), REPORT=str(tmp_path / "report"))
    ran = subprocess.run(
        [sys.executable, pytest_main.__file__, str(tmp_path / "where_test.py")],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "report").read_text().startswith(str(test_tmpdir / "pytest") + os.sep)
