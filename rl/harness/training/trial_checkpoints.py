"""A Tune trial's checkpoint brought to the driver's disk from the node that saved it.

    trial_checkpoints.bring_here(checkpoint.path, node_id)   # in the driver, before the run records it

Tune saves a trial's checkpoint into its storage path on the disk of the node that ran the trial.
The run's Tune storage is its artifacts folder, which the run's mirror sends to the store from the
driver's machine. On a cluster whose nodes share no disk, a checkpoint saved on another node is
therefore copied here, one file at a time (at most one file in memory), by tasks pinned to that node,
into a `.partial-*` folder renamed into place: the mirror never sees half a checkpoint, and the
store's index and sha256 cover it as any checkpoint of the run. Where the folder is already here (a
trial of the driver's node, a shared disk), nothing is copied.

Tune refuses to save a trial's checkpoint where the driver's storage marker (a file Tune writes into
the storage folder when the experiment starts) is not found, its guard against a path that is not a
shared disk. Copying replaces the shared disk, so each trial writes the marker on its own node
(`mark_storage`, an RLlib on_algorithm_init callback); `tests/tune_store_test.py` fails once Tune
changes that guard.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=0)
def _files(folder: str) -> list[str]:
    root = pathlib.Path(folder)
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


@ray.remote(num_cpus=0)
def _read(path: str) -> bytes:
    return pathlib.Path(path).read_bytes()


def mark_storage(*, algorithm, **_) -> None:
    """RLlib on_algorithm_init callback (in the trial's process): Tune's storage marker on this node's disk."""
    storage = getattr(algorithm, "_storage", None)  # Tune's StorageContext; None outside Tune
    if storage is not None:
        storage._create_validation_file()


def bring_here(path: str, node_id: str | None) -> bool:
    """Copies checkpoint folder `path` from node `node_id` unless it is on this disk already; whether it copied.

    Raises `ray.exceptions.RayError` when that node cannot serve it (lost meanwhile).
    """
    folder = pathlib.Path(path)
    if node_id is None or folder.is_dir():
        return False
    on_node = NodeAffinitySchedulingStrategy(node_id, soft=False)
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = pathlib.Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".partial-{folder.name}-"))
    try:
        for relative in ray.get(_files.options(scheduling_strategy=on_node).remote(path)):
            target = partial / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(ray.get(_read.options(scheduling_strategy=on_node).remote(str(folder / relative))))
        os.rename(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return True
