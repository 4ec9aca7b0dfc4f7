"""rl.harness.commands: The command line and what it runs: parsing, validated requests, recipes, resume, the run catalog, reproduce."""
