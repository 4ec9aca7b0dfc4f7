"""rl.harness.remote: Remote storage: the Backblaze B2 mirror."""
