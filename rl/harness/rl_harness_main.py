"""Entry point of the `//rl/harness:rl-harness` binary (see rl.harness.cli)."""

from rl.harness import cli

cli.entry_point()
