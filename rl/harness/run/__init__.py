"""rl.harness.run: The run's records: context, session, record files, ids and status, layout, manifest, provenance, build info, seeds, metric keys."""
