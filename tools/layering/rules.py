"""The import rules of the library's layers (what each package under rl/ may import).

Bazel visibility (//:BUILD.bazel package groups) enforces first-party edges at
analysis time; this table additionally covers third-party packages and imports
hidden from Bazel (e.g. a lazy import inside a function). Keep both in sync.
"""

from __future__ import annotations

import sys

# Third-party distributions every layer's tests may use. grpc (installed with Ray): a test calls each
# port of a local Ray cluster without its token, to prove every one refuses (rl/harness/tests/cluster_auth_test.py).
TEST_ONLY = frozenset({"pytest", "grpc"})

# layer -> (first-party layers it may import, third-party top-level modules it may import)
LAYERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "envs": (frozenset(), frozenset({"numpy", "gymnasium", "scipy"})),
    "losses": (frozenset(), frozenset({"torch"})),
    "learners": (frozenset({"losses"}), frozenset({"torch", "ray", "numpy", "gymnasium"})),
    "harness": (
        frozenset(),
        frozenset(
            {
                "absl",
                "ray",
                "numpy",
                "torch",
                "b2sdk",
                "pyarrow",
                "scipy",
                "matplotlib",
                "tensorboard",
                "google_crc32c",
                "gymnasium",
                "mlflow",
            }
        ),
    ),
    "analysis": (
        frozenset({"learners", "harness"}),
        frozenset({"numpy", "scipy", "torch", "ray", "matplotlib", "gymnasium", "pandas"}),
    ),
    "devops": (frozenset({"harness"}), frozenset({"vastai", "requests", "b2sdk"})),
}

STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}

# The command line is a leaf: only its entry points (and tests) import it; library code takes
# recipes, errors, metric names and run layouts from their own harness modules.
CLI_MODULE = "rl.harness.commands.cli"
CLI_ENTRY_POINTS = frozenset({"rl/harness/commands/main.py", "rl/harness/benchmarks/bench_harness_overhead.py"})

# Third-party modules that a layer may import only in some of its folders (and in its tests):
# the harness imports Ray and torch only in training/ (docs/architecture.md), so its records,
# catalog and command line work, and `rl-harness runs` stays fast, without them.
CONFINED: dict[tuple[str, str], tuple[str, ...]] = {
    ("harness", "ray"): ("rl/harness/training/", "rl/harness/benchmarks/"),
    ("harness", "torch"): ("rl/harness/training/", "rl/harness/benchmarks/"),
    # The batched EnvRunner steps RLlib's Gymnasium vector envs itself.
    ("harness", "gymnasium"): ("rl/harness/training/",),
    # A study's summary: t quantiles, trimmed means, its curves and score distributions figures.
    ("harness", "scipy"): ("rl/harness/study/",),
    ("harness", "matplotlib"): ("rl/harness/study/", "rl/harness/commands/compare.py"),  # and `compare`'s overlay
    # Runs and studies as DataFrames (pandas is in the lock through Ray), imported inside the loaders.
    ("analysis", "pandas"): ("rl/analysis/tables.py",),
    # The object store's clients: B2's native API and pyarrow's S3 client (docs/architecture.md).
    ("harness", "b2sdk"): ("rl/harness/remote/",),
    ("harness", "pyarrow"): ("rl/harness/remote/",),
    # A run's metrics as TensorBoard events, a study's HParams view, and the server over them (docs/architecture.md).
    # `export --to mlflow`'s writer, run by a python that has MLflow (never the harness's venv: not in its lock).
    ("harness", "mlflow"): ("rl/harness/commands/mlflow_writer.py",),
    ("harness", "tensorboard"): (
        "rl/harness/run/tensorboard_events.py",
        "rl/harness/study/hparams.py",
        "rl/harness/commands/tensorboard_view.py",
    ),
    ("harness", "google_crc32c"): ("rl/harness/run/tensorboard_events.py",),  # the events' record checksums
}
