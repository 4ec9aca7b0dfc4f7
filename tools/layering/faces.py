"""Code outside rl.harness, rl.learners and rl.analysis imports them through their faces.

    python3 tools/layering/faces.py [ROOT]     # exit 1 and one line per import past a face

A face is a package's `__init__.py` and its `__all__`: what the package offers the code above it
(TorchRL's style). Outside the package, `from rl.analysis.plots import save_figure` names a face
and one of its public names; `from rl.analysis.plots.save import save_figure` reaches past it to
a module, which may move. Tests (under `tests/`, `*_test.py`, test support under `testing/`) are
the package's own and are exempt.
"""

from __future__ import annotations

import ast
import pathlib
import sys

FACED = ("rl.harness", "rl.learners", "rl.analysis")
ROOTS = ("rl", "experiments", "tools")


def _is_test(relative: pathlib.Path) -> bool:
    return bool({"tests", "testing"} & set(relative.parts)) or relative.name.endswith("_test.py")


def _package_of(relative: pathlib.Path) -> str:
    parts = relative.with_suffix("").parts
    return ".".join(parts[:-1])


def public_names(init: pathlib.Path) -> frozenset[str] | None:
    """The names of a face's `__all__` (a literal list or tuple, or `sorted()` of a literal dict, list or
    tuple assigned in the same file); None when it has no `__all__` this can read."""
    tree = ast.parse(init.read_text(), filename=str(init))
    literals: dict[str, ast.expr] = {}
    value = None
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                literals[target.id] = node.value
                if target.id == "__all__":
                    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "sorted" and value.args:
        value = value.args[0]
        if isinstance(value, ast.Name):
            value = literals.get(value.id)
    if isinstance(value, ast.Dict):
        value = ast.List(elts=[key for key in value.keys if key is not None])
    if not isinstance(value, (ast.List, ast.Tuple)):
        return None
    return frozenset(elt.value for elt in value.elts if isinstance(elt, ast.Constant) and isinstance(elt.value, str))


def _face(module: str) -> str | None:
    return next((face for face in FACED if module == face or module.startswith(face + ".")), None)


def find_face_violations(root: pathlib.Path) -> list[str]:
    """One line per import, outside a faced package and its tests, of a module past a face or of a name
    its face does not list in `__all__`."""
    root = pathlib.Path(root)
    names_cache: dict[str, frozenset[str] | None] = {}
    found = []
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root)
            if _is_test(relative):
                continue
            own = _package_of(relative)
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    imports = [(node.module, [alias.name for alias in node.names])]
                elif isinstance(node, ast.Import):
                    imports = [(alias.name, []) for alias in node.names]
                else:
                    continue
                for module, names in imports:
                    face = _face(module)
                    if face is None or own == face or own.startswith(face + "."):
                        continue
                    init = root / module.replace(".", "/") / "__init__.py"
                    if not init.exists():
                        found.append(
                            f"{relative}:{node.lineno}: imports {module}, a module past its face;"
                            f" import from {module.rpartition('.')[0]} (add the name to its __all__)"
                        )
                        continue
                    if module not in names_cache:
                        names_cache[module] = public_names(init)
                    public = names_cache[module]
                    missing = [name for name in names if public is None or name not in public]
                    if missing:
                        found.append(
                            f"{relative}:{node.lineno}: imports {', '.join(missing)} from {module},"
                            f" which its face does not list in __all__; list it there or import what it lists"
                        )
    return found


def main(argv: list[str]) -> int:
    found = find_face_violations(pathlib.Path(argv[1] if len(argv) > 1 else "."))
    print("\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
