"""rl.harness.remote: object storage, the durable home of runs (Backblaze B2 and S3-compatible stores)."""

# The modules code above the harness imports by name (`from rl.harness.remote import b2_mirror`); nothing is imported here.
__all__ = ["b2_mirror", "run_mirror", "store", "stores"]
