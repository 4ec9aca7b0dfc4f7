"""Finding a recipe (a module with `run(context)`) and where its records go by default.

from rl.harness.commands import recipes

module = recipes.load_recipe("experiments.mess3.reward_only")    # UsageError naming the fix
recipes.recipe_folder("experiments.mess3.reward_only")            # <workspace>/experiments/mess3
results_root, artifacts_root = recipes.run_roots(None, None, "experiments.mess3.reward_only")
"""

from __future__ import annotations

import importlib
import importlib.util
import logging as std_logging
import os
import pathlib
import sys

from absl import logging

from rl.harness import env_vars
from rl.harness.errors import UsageError
from rl.harness.run.manifest import DOTTED_NAME


def recipe_folder(module_name: str) -> pathlib.Path:
    """Where a recipe's results/ and artifacts/ go by default: beside its source.

    Under `bazel run` that is $BUILD_WORKSPACE_DIRECTORY/<package path>, not the runfiles copy.
    """
    spec = importlib.util.find_spec(module_name)
    parts = module_name.split(".")
    if spec.submodule_search_locations is None:
        parts = parts[:-1]
    workspace = env_vars.workspace_directory()
    if workspace:
        return pathlib.Path(workspace, *parts)
    folder = pathlib.Path(spec.origin).parent
    if ".runfiles" in folder.parts or any(part.endswith(".runfiles") for part in folder.parts):
        raise UsageError(
            f"{module_name} runs from Bazel runfiles outside `bazel run`; pass --results-dir and --artifacts-dir"
        )
    return folder


def _nested(inner: pathlib.Path, outer: pathlib.Path) -> bool:
    return inner == outer or outer in inner.parents


def run_roots(
    results_dir: pathlib.Path | None, artifacts_dir: pathlib.Path | None, module_name: str
) -> tuple[pathlib.Path, pathlib.Path]:
    """(results root, artifacts root): the given folders, else results/ and artifacts/ beside the recipe."""
    folder = recipe_folder(module_name) if results_dir is None or artifacts_dir is None else None
    results_root = check_folder((results_dir or folder / "results").expanduser().resolve(), "--results-dir")
    artifacts_root = check_folder((artifacts_dir or folder / "artifacts").expanduser().resolve(), "--artifacts-dir")
    if _nested(results_root, artifacts_root) or _nested(artifacts_root, results_root):
        raise UsageError(
            f"results ({results_root}) and artifacts ({artifacts_root}) must be separate folders,"
            " neither inside the other: results are small and committed, artifacts big and"
            " git-ignored; change --results-dir or --artifacts-dir"
        )
    return results_root, artifacts_root


def check_folder(path: pathlib.Path, flag: str) -> pathlib.Path:
    """`path` if it is a folder or can become one; UsageError naming the file in the way otherwise."""
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                where = "is" if place == path else f"lies under {place}, which is"
                raise UsageError(
                    f"{flag} {path} {where} a file, not a folder; pass a folder (it is created if missing)"
                )
            return path
    return path


def check_writable(folder: pathlib.Path, flag: str) -> None:
    """UsageError unless `folder` exists writable or can be created: its nearest existing folder must take writes.

    `os.access` asks the kernel, so a read-only mount is refused for root too (root ignores modes).
    """
    place = next(place for place in (folder, *folder.parents) if place.exists())
    if os.access(place, os.W_OK | os.X_OK):
        return
    why = "on a read-only file system" if os.statvfs(place).f_flag & os.ST_RDONLY else "not writable by this user"
    raise UsageError(f"{flag}: {place} is {why}, so {folder} cannot be written; pass a writable {flag}")


def _import_recipe(module_name: str):
    """The module, or None if the recipe itself (not one of its imports) is missing."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            return None
        raise UsageError(f"importing {module_name} failed: {error}; install or add that dependency") from None
    except Exception as error:  # noqa: BLE001 - a recipe's import may raise anything; one line names it
        raise UsageError(f"importing {module_name} failed: {type(error).__name__}: {error}") from None


def _look_in_workspace(module_name: str, workspace: str) -> None:
    """Lets `module_name` be imported from the source tree, also inside packages the binary has."""
    sys.path.append(workspace)
    parts = module_name.split(".")
    for depth in range(1, len(parts)):
        package = sys.modules.get(".".join(parts[:depth]))
        folder = os.path.join(workspace, *parts[:depth])
        if (
            package is not None
            and hasattr(package, "__path__")
            and os.path.isdir(folder)
            and folder not in package.__path__
        ):
            package.__path__.append(folder)
    importlib.invalidate_caches()


def load_module(module_name: str):
    """A recipe's or a study's module; under `bazel run` a module outside the binary is found in the workspace."""
    if not DOTTED_NAME.fullmatch(module_name):
        raise UsageError(f"{module_name!r} is not a dotted module name; pass e.g. experiments.mess3.reward_only")
    module = _import_recipe(module_name)
    workspace = env_vars.workspace_directory()
    if module is None and workspace and workspace not in sys.path:
        _look_in_workspace(module_name, workspace)
        module = _import_recipe(module_name)
        if module is not None:
            logging.warning(
                "%s was imported from the source tree %s: it is not covered by this binary's build"
                " hash; an rl_experiment target makes it so",
                module_name,
                workspace,
            )
    if module is None:
        raise UsageError(
            f"no module named {module_name!r}: check the dotted name and run from the repository"
            " root (or give the recipe an rl_experiment target)"
        )
    return module


def load_recipe(module_name: str):
    """The recipe module (`load_module`), which must define run(context)."""
    # Its imports (RLlib) raise the root logger's level: the lines before the run starts (what `--resume-from`
    # fetched from the store) would otherwise never reach the log. Both loggers' own levels are put back as they were
    # (absl's verbosity flag is not the level in force where absl's handler is not installed, as under pytest).
    levels = [(logger, logger.level) for logger in (std_logging.getLogger(), logging.get_absl_logger())]
    module = load_module(module_name)
    for logger, level in levels:
        logger.setLevel(level)
    if not callable(getattr(module, "run", None)):
        raise UsageError(f"{module_name} has no run(context) function; define `def run(context): ...` in it")
    return module
