"""rl.harness.run: The run's records: context, session (and its jobs), record files, ids and status, layout, manifest, provenance, finding recorded runs, build info, seeds, metric keys."""
