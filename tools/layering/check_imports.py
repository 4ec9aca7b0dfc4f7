"""Checks every import under rl/ against tools/layering/rules.py.

    python3 tools/layering/check_imports.py [ROOT]     # exit 1 and one line per violation or import cycle

`find_violations(root)` and `find_import_cycles(root)` are the library entry points (used by
//rl:layering_test).
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import sys
from collections.abc import Iterator

from tools.layering import rules


@dataclasses.dataclass(frozen=True)
class Violation:
    path: str
    line: int
    module: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.module}: {self.reason}"


def _imported_modules(tree: ast.AST, package: str):
    """Yields (line, absolute dotted module) for each import in a module of `package`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, _from_module(node, package)


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of `from <module> import ...` in a module of `package` (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _cli_imports(tree: ast.AST, package: str):
    """Lines that import the CLI module (`import rl.harness.commands.cli`, `from rl.harness import cli`, `from . import cli`)."""
    parent, _, name = rules.CLI_MODULE.rpartition(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == rules.CLI_MODULE for a in node.names):
            yield node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, package)
            if module == rules.CLI_MODULE or (module == parent and any(a.name == name for a in node.names)):
                yield node.lineno


def check_file(path: pathlib.Path, root: pathlib.Path) -> list[Violation]:
    relative = path.relative_to(root)
    parts = relative.parts
    if len(parts) < 3 or parts[0] != "rl":
        return []  # rl/__init__.py and files outside layers have no rules
    layer = parts[1]
    if layer not in rules.LAYERS:
        return [Violation(str(relative), 0, "-", f"rl/{layer} is not a known layer; add it to tools/layering/rules.py")]
    allowed_layers, allowed_third_party = rules.LAYERS[layer]
    is_test = "tests" in parts or path.name.endswith("_test.py")
    package = ".".join(parts[:-1])
    violations = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for line, module in _imported_modules(tree, package):
        top = module.split(".")[0]
        if top == "rl":
            target = module.split(".")[1] if module.count(".") else None
            if target is None or target == layer or target in allowed_layers:
                continue
            reason = f"rl/{layer} may not depend on rl/{target} (allowed: {sorted(allowed_layers) or 'none'})"
        elif top in ("experiments", "experiments_template"):
            reason = "generic code must never import an experiment"
        elif top in rules.STDLIB:
            continue
        elif top in allowed_third_party:
            folders = rules.CONFINED.get((layer, top))
            if is_test or folders is None or str(relative).startswith(folders):
                continue
            reason = f"'{top}' is confined to {', '.join(folders)} in rl/{layer}; move this code there"
        elif is_test and top in rules.TEST_ONLY:
            continue
        else:
            reason = f"third-party '{top}' is not allowed in rl/{layer} (allowed: {sorted(allowed_third_party)})"
        violations.append(Violation(str(relative), line, module, reason))
    if not is_test and str(relative) not in rules.CLI_ENTRY_POINTS:
        violations += [
            Violation(
                str(relative),
                line,
                rules.CLI_MODULE,
                "only the CLI's entry points import it; use rl.harness.commands.recipes, errors, metric_keys"
                " or layout instead",
            )
            for line in _cli_imports(tree, package)
        ]
    return violations


def find_violations(root: pathlib.Path) -> list[Violation]:
    root = pathlib.Path(root)
    violations = []
    for path in sorted((root / "rl").rglob("*.py")):
        violations.extend(check_file(path, root))
    return violations


def _module_of(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(tree: ast.Module, package: str, modules) -> Iterator[str]:
    """Absolute modules a module names at its top level: what runs when it is executed, and the
    `TYPE_CHECKING` blocks too (a type a module needs lives on the lowest floor that needs it)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                yield from (alias.name for alias in inner.names)
            elif isinstance(inner, ast.ImportFrom):
                module = _from_module(inner, package)
                for alias in inner.names:  # `from pkg import submodule` is an edge to the submodule, else to pkg
                    yield f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module


def find_import_cycles(root: pathlib.Path) -> list[list[str]]:
    """Cycles of module-level imports among the modules under rl/ (each a list of modules, sorted).

    An edge is a top-level import, `TYPE_CHECKING` ones included; one inside a function is not (it
    runs later, when the modules are whole). A package's own __init__ reached
    only as a parent on the way to a submodule is not one (Python has it half-initialised then).
    """
    root = pathlib.Path(root)
    sources = {}
    for path in sorted((root / "rl").rglob("*.py")):
        sources[_module_of(path, root)] = path
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[module] = {
            name for name in _module_level_imports(tree, package, sources) if name in sources and name != module
        }
    return _strongly_connected(graph)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one module, i.e. the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0]) if argv else pathlib.Path(__file__).resolve().parents[2]
    violations = find_violations(root)
    for violation in violations:
        print(violation)
    cycles = find_import_cycles(root)
    for cycle in cycles:
        print("import cycle: " + " -> ".join(cycle))
    return 1 if violations or cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
