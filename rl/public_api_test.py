"""Every import a README or doc shows still works as written (moving code never breaks them), and every
name of the harness's face (`rl.harness.__all__`) imports, lazily.

The snippets are the `from rl...` / `import rl...` statements of the Python code blocks in
README.md, docs/*.md and rl/*/README.md, plus the seed project's documented imports.
"""

import importlib
import os
import pathlib
import re
import subprocess
import sys

import pytest

# The seed project's README (as `from learners.models import ...`; `rl.learners.models` here).
SEED_PROJECT_IMPORTS = (
    "from rl.learners.models import PPGAuxiliaryValueHead, TransformerModel",
    "from rl.learners.models import IQNValueMixin, QRValueMixin",
)
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_IMPORT = re.compile(r"^(from rl[\w.]* import [^\n(]+|from rl[\w.]* import \([^)]*\)|import rl[\w.]*)", re.MULTILINE)


def _documents() -> list[pathlib.Path]:
    root = pathlib.Path(__file__).resolve().parent.parent
    found = [root / "README.md", *sorted(root.glob("docs/*.md")), *sorted(root.glob("rl/*/README.md"))]
    return [path for path in found if path.exists()]


def documented_imports() -> list[tuple[str, str]]:
    """(where, statement) for every rl import in the docs' Python blocks."""
    statements = []
    for path in _documents():
        for block in _BLOCK.findall(path.read_text()):
            for statement in _IMPORT.findall(block):
                statements.append((path.name, statement.split("#")[0].strip()))
    return statements


def test_the_docs_show_imports_to_check():
    assert len(_documents()) >= 5, f"expected the docs in runfiles, found {_documents()}"
    assert len(documented_imports()) >= 10


@pytest.mark.parametrize(
    "where,statement", [*documented_imports(), *(("seed README", s) for s in SEED_PROJECT_IMPORTS)]
)
def test_a_documented_import_works_as_written(where, statement):
    namespace: dict = {}
    exec(statement, namespace)  # noqa: S102 - the statement is a documented import, run as written
    imported = [value for name, value in namespace.items() if name != "__builtins__"]
    assert imported, f"{where}: `{statement}` imported nothing"


def test_every_name_of_the_harness_face_imports_without_ray_or_torch():
    code = (
        "import sys\nimport rl.harness\nloaded = {'ray', 'torch'} & set(sys.modules)\n"
        "[getattr(rl.harness, name) for name in rl.harness.__all__]\nprint(sorted(loaded))"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    shown = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


@pytest.mark.parametrize("face", ["rl.learners", "rl.analysis"])
def test_a_lazy_face_lists_exactly_what_it_loads(face):
    module = importlib.import_module(face)
    assert sorted(module.__all__) == sorted(module._EXPORTS), f"{face}: __all__ and _EXPORTS name other things"


def test_every_name_of_the_learners_face_loads():  # rl.analysis's: //rl/analysis:face_test
    import rl.learners

    assert [name for name in rl.learners.__all__ if getattr(rl.learners, name, None) is None] == []
