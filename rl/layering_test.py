"""Every import under rl/ follows the layer rules, and code outside rl.harness, rl.learners and rl.analysis
imports them through their faces; a forbidden import is caught."""

import os
import pathlib

from tools.layering import check_imports, faces

WORKSPACE = pathlib.Path(os.environ.get("TEST_SRCDIR", "."), os.environ.get("TEST_WORKSPACE", "rl_harness"))


def _write(root: pathlib.Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_tree_follows_the_layer_rules():
    sources = list((WORKSPACE / "rl").rglob("*.py"))
    assert len(sources) >= 7, f"expected the layers' sources in runfiles, found {sources}"
    assert check_imports.find_violations(WORKSPACE) == []


def test_envs_importing_harness_is_a_violation(tmp_path):
    _write(tmp_path, "rl/envs/bad.py", "import rl.harness\nfrom rl.harness import buildinfo\n")
    violations = check_imports.find_violations(tmp_path)
    assert [(v.path, v.line) for v in violations] == [("rl/envs/bad.py", 1), ("rl/envs/bad.py", 2)]
    assert "may not depend on rl/harness" in violations[0].reason


def test_relative_import_across_layers_is_resolved(tmp_path):
    _write(tmp_path, "rl/losses/sub/mod.py", "from ...learners import models\n")
    (violation,) = check_imports.find_violations(tmp_path)
    assert violation.module == "rl.learners"


def test_forbidden_third_party_in_envs(tmp_path):
    _write(tmp_path, "rl/envs/uses_torch.py", "import torch\nimport numpy\nimport json\n")
    (violation,) = check_imports.find_violations(tmp_path)
    assert violation.module == "torch" and "third-party" in violation.reason


def test_learners_may_use_losses_but_not_envs(tmp_path):
    _write(tmp_path, "rl/learners/a.py", "from rl.losses import quantile\nfrom rl.envs import hmm\n")
    (violation,) = check_imports.find_violations(tmp_path)
    assert violation.module == "rl.envs"


def test_generic_code_never_imports_an_experiment(tmp_path):
    _write(tmp_path, "rl/analysis/a.py", "from experiments.mess3 import reward_only\n")
    (violation,) = check_imports.find_violations(tmp_path)
    assert "experiment" in violation.reason


def test_pytest_only_in_tests(tmp_path):
    _write(tmp_path, "rl/envs/tests/thing_test.py", "import pytest\n")
    _write(tmp_path, "rl/envs/thing.py", "import pytest\n")
    (violation,) = check_imports.find_violations(tmp_path)
    assert violation.path == "rl/envs/thing.py"


def test_only_entry_points_import_the_cli(tmp_path):
    _write(
        tmp_path, "rl/analysis/a.py", "from rl.harness.commands import cli\nfrom rl.harness.commands import recipes\n"
    )
    _write(tmp_path, "rl/harness/b.py", "import rl.harness.commands.cli\n")
    _write(tmp_path, "rl/harness/commands/c.py", "from . import cli\n")
    _write(tmp_path, "rl/harness/commands/main.py", "from rl.harness.commands import cli\n")
    _write(tmp_path, "rl/harness/tests/cli_test.py", "from rl.harness.commands.cli import main\n")
    violations = check_imports.find_violations(tmp_path)
    assert [(v.path, v.line) for v in violations] == [
        ("rl/analysis/a.py", 1),
        ("rl/harness/b.py", 1),
        ("rl/harness/commands/c.py", 1),
    ]
    assert "entry points" in violations[0].reason


def test_ray_and_torch_only_under_harness_training(tmp_path):
    _write(tmp_path, "rl/harness/run/records.py", "import ray\nimport torch\n")
    _write(tmp_path, "rl/harness/commands/cli.py", "def later():\n    from ray import tune\n")
    _write(tmp_path, "rl/harness/training/runners.py", "import ray\nimport torch\n")
    _write(tmp_path, "rl/harness/tests/runners_test.py", "import ray\n")
    violations = check_imports.find_violations(tmp_path)
    assert [(v.path, v.line) for v in violations] == [
        ("rl/harness/commands/cli.py", 2),
        ("rl/harness/run/records.py", 1),
        ("rl/harness/run/records.py", 2),
    ]
    assert "confined to rl/harness/training/" in violations[0].reason


def test_the_tree_has_no_module_level_import_cycle():
    assert check_imports.find_import_cycles(WORKSPACE) == []


def test_an_import_cycle_is_found_and_lazy_imports_are_not_edges(tmp_path):
    _write(tmp_path, "rl/harness/__init__.py", "")
    _write(tmp_path, "rl/harness/a.py", "from rl.harness import b\n")
    _write(tmp_path, "rl/harness/b.py", "import rl.harness.c\n")
    _write(tmp_path, "rl/harness/c.py", "from rl.harness.a import thing\n")
    _write(tmp_path, "rl/harness/d.py", "def f():\n    from rl.harness import e\n")
    _write(tmp_path, "rl/harness/e.py", "from rl.harness import d\n")
    assert check_imports.find_import_cycles(tmp_path) == [["rl.harness.a", "rl.harness.b", "rl.harness.c"]]


def test_a_type_only_import_closes_a_cycle(tmp_path):
    _write(tmp_path, "rl/harness/__init__.py", "")
    _write(
        tmp_path,
        "rl/harness/low.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rl.harness.high import T\n",
    )
    _write(tmp_path, "rl/harness/high.py", "from rl.harness import low\n")
    assert check_imports.find_import_cycles(tmp_path) == [["rl.harness.high", "rl.harness.low"]]


def test_the_tree_imports_the_library_through_its_faces():
    assert len(list((WORKSPACE / "experiments").rglob("*.py"))) >= 20, "expected the experiments' sources in runfiles"
    assert faces.find_face_violations(WORKSPACE) == []


def _library(root: pathlib.Path) -> None:
    _write(
        root, "rl/analysis/__init__.py", '_EXPORTS = {"save_figure": "rl.analysis.plots"}\n__all__ = sorted(_EXPORTS)\n'
    )
    _write(root, "rl/analysis/plots/__init__.py", '__all__ = ["save_figure"]\n')
    _write(root, "rl/analysis/plots/save.py", "def save_figure(): ...\ndef helper(): ...\n")


def test_a_module_past_a_face_and_an_unlisted_name_are_caught(tmp_path):
    _library(tmp_path)
    _write(
        tmp_path,
        "experiments/x/recipe.py",
        "from rl.analysis.plots.save import save_figure\n"
        "from rl.analysis.plots import helper\n"
        "import rl.analysis.plots.save\n",
    )
    found = faces.find_face_violations(tmp_path)
    assert [line.split(":")[1] for line in found] == ["1", "2", "3"]
    assert "a module past its face" in found[0] and "helper from rl.analysis.plots" in found[1]


def test_faces_the_package_itself_and_tests_may_pass(tmp_path):
    _library(tmp_path)
    _write(
        tmp_path,
        "experiments/x/recipe.py",
        "from rl.analysis import save_figure\nfrom rl.analysis.plots import save_figure\n",
    )
    _write(tmp_path, "rl/analysis/probing.py", "from rl.analysis.plots.save import helper\n")
    _write(tmp_path, "experiments/x/tests/recipe_test.py", "from rl.analysis.plots.save import helper\n")
    assert faces.find_face_violations(tmp_path) == []
