"""rl.harness.commands: The command line and what it runs: parsing, validated requests, recipes, resume, the run catalog, reproduce."""

# The modules code above the harness imports by name (`from rl.harness.commands import catalog`); nothing is imported here.
__all__ = ["catalog", "cli", "recipes"]
