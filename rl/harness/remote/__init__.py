"""rl.harness.remote: Remote storage: the Backblaze B2 mirror."""

# The modules code above the harness imports by name (`from rl.harness.remote import b2_mirror`); nothing is imported here.
__all__ = ["b2_mirror", "run_mirror", "store"]
