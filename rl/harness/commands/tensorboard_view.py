"""TensorBoard over the runs of a results tree: `bazel run //tools:tensorboard -- [FOLDER] [tensorboard flags]`.

    bazel run //tools:tensorboard                                   # every run in the workspace
    bazel run //tools:tensorboard -- experiments/mess3/results --port 6007
    bazel run //tools:tensorboard -- experiments/mess3/artifacts     # the artifacts tree works too

Every run writes its metrics as TensorBoard events while it trains (`paths.tensorboard` in its
manifest: artifacts/<run-id>/tensorboard/, shared by the runs that resumed it; see
rl/harness/run/tensorboard_events.py). This finds the runs under FOLDER as `rl-harness runs` does,
links each events folder into a temporary folder as `<experiment>/[smoke/]<run-id>` (TensorBoard
follows a tree of links) and serves that. A FOLDER without runs, such as an artifacts tree (or one
run's artifacts folder), is searched for `<run-id>/tensorboard/` folders instead, named
`[smoke/]<run-id>`. FOLDER is relative to where the command was typed;
flags after it go to TensorBoard unchanged (`--port`, `--host`, `--bind_all`, ...).
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

from rl.harness import env_vars
from rl.harness.errors import UsageError
from rl.harness.run import finder, tensorboard_events
from rl.harness.run.layout import RunLayout

PROGRAM = "tensorboard"
_EVENT_FILES = "events.out.tfevents.*"


def events_folders(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """`<experiment>/[smoke/]<run-id>` -> events folder, for every run under `root` whose events exist.

    A resumed run shares its parent's folder, so the lineage appears once, under the first run's id.
    """
    folders: dict[pathlib.Path, str] = {}
    for run in finder.find_runs([str(root)]):
        recorded = run.manifest.paths.get(tensorboard_events.MANIFEST_PATH_KEY)
        if not recorded or not pathlib.Path(recorded).is_dir():
            continue
        artifacts_root = RunLayout.of_run(run.run_dir, run.manifest).artifacts_root
        if not tensorboard_events.is_events_folder_of(pathlib.Path(recorded), artifacts_root):
            print(
                f"{PROGRAM}: skipping run {run.run_id}: its records name {recorded} as its events folder, which is"
                f" not a run's events folder under {artifacts_root}",
                file=sys.stderr,
            )
            continue
        owner = pathlib.Path(recorded).parent  # artifacts/[smoke/]<run-id> of the lineage's first run
        prefix = "smoke/" if run.manifest.smoke else ""
        folders.setdefault(pathlib.Path(recorded), f"{run.manifest.experiment.module}/{prefix}{owner.name}")
    return {name: folder for folder, name in folders.items()}


def events_folders_below(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """`[smoke/]<run-id>` -> events folder, for every `<run-id>/tensorboard/` holding events under an artifacts tree.

    An artifacts tree has no manifests, so the names lack the experiment; a results tree's runs have it.
    """
    found = {}
    for folder, subfolders, _ in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith((".", "bazel-")))
        path = pathlib.Path(folder)
        if path.name == tensorboard_events.EVENTS_DIR and next(path.rglob(_EVENT_FILES), None) is not None:
            owner = path.parent
            found[str(owner.relative_to(root)) if root in owner.parents else owner.name] = path
            subfolders[:] = []
    return found


def link_tree(folders: dict[str, pathlib.Path], tree: pathlib.Path) -> None:
    """`tree/<name>` -> each events folder: one TensorBoard log folder naming every run.

    A name that would place its link outside `tree` (an edited manifest), or inside another run's
    linked folder (written there through the link, it would outlive the tree), is skipped, with a warning.
    """
    for name, folder in sorted(folders.items()):
        parts = pathlib.PurePosixPath(name).parts
        if pathlib.PurePosixPath(name).is_absolute() or any(part in (".", "..") for part in parts):
            print(
                f"{PROGRAM}: skipping {folder}: its run's records name it {name!r}, which leads outside the tree"
                " of links; the manifest was edited",
                file=sys.stderr,
            )
            continue
        if any(tree.joinpath(*parts[:end]).is_symlink() for end in range(1, len(parts))):
            print(
                f"{PROGRAM}: skipping {folder}: its name {name!r} lies inside another run's linked events folder",
                file=sys.stderr,
            )
            continue
        link = tree / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(folder, target_is_directory=True)


def _root(argument: str | None) -> pathlib.Path:
    if argument is None:
        return pathlib.Path(env_vars.workspace_directory() or env_vars.working_directory())
    root = pathlib.Path(env_vars.working_directory()) / pathlib.Path(argument).expanduser()
    if not root.is_dir():
        raise UsageError(
            f"{root} is not a folder; pass a results or artifacts tree (a folder holding"
            " [results|artifacts]/<run-id>/) or nothing for the whole workspace"
        )
    return root


def main(argv: list[str]) -> int:
    folder = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else None
    tensorboard_flags = argv[2:] if folder is not None else argv[1:]
    try:
        root = _root(folder)
        folders = events_folders(root) or events_folders_below(root)
        if not folders:
            raise UsageError(
                f"no run under {root} has TensorBoard events; runs write them into"
                " artifacts/<run-id>/tensorboard/ while they train: pass the results or artifacts tree of"
                " such runs"
            )
    except UsageError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return error.exit_status
    from tensorboard import program  # the server, only once there is something to serve

    with tempfile.TemporaryDirectory(prefix="rl-harness-tensorboard-") as tree:
        link_tree(folders, pathlib.Path(tree))
        print(
            f"{PROGRAM}: {len(folders)} run(s) under {root}; the headline curves (each run's summarised metrics,"
            " the return first) are in the CUSTOM SCALARS tab",
            flush=True,
        )
        board = program.TensorBoard()
        board.configure(argv=[PROGRAM, "--logdir", tree, *tensorboard_flags])
        return board.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
