"""rl.harness.run: the run's records: context, session (and its jobs), record files, ids and status, layout,
manifest, provenance, finding recorded runs, build info, seeds, metric keys.

Code above the harness imports the modules `__all__` lists by their name (`from rl.harness.run import
records`, then `records.write_json_atomically(...)`); the rest are this room's own. Nothing is imported
here: importing one module of the room costs only that module.
"""

__all__ = [
    "buildinfo",
    "layout",
    "manifest",
    "metric_keys",
    "metrics_stream",
    "provenance",
    "records",
    "redaction",
    "rows",
    "seeding",
    "status",
]
