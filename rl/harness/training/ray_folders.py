"""Ray's own folders of a run inside its artifacts folder, never in the user's home.

    with ray_folders.logs_under(context.artifacts_dir / ray_folders.RAY_LOGS):
        algo = config.build_algo()          # its log folder: artifacts/<run-id>/ray_logs/<date><random>

An Algorithm built outside Tune is a Trainable without storage, and Ray (2.56,
`ray.tune.trainable.trainable.Trainable._setup_logdir`) gives it a log folder made by
`tempfile.mkdtemp(dir=DEFAULT_STORAGE_PATH)`, a module constant read once at import:
`~/ray_results`, where each run would leave an empty folder, and which a read-only home refuses
after Ray has started. `logs_under` points that constant at the run's artifacts while an
algorithm is built (Ray's private name, hence this one place; tests/ray_folders_test.py fails
once Ray changes it). Tune runs keep theirs in their storage (`artifacts/<run-id>/tune`).
"""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

RAY_LOGS = "ray_logs"  # in artifacts/<run-id>/: the log folders of the Algorithms a run builds


@contextlib.contextmanager
def logs_under(folder: pathlib.Path) -> Iterator[None]:
    """While entered, a Trainable built without Tune storage makes its log folder in `folder` (created)."""
    from ray.tune.trainable import trainable

    folder.mkdir(parents=True, exist_ok=True)
    previous = trainable.DEFAULT_STORAGE_PATH
    trainable.DEFAULT_STORAGE_PATH = str(folder)
    try:
        yield
    finally:
        trainable.DEFAULT_STORAGE_PATH = previous
