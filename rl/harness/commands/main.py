"""Entry point of the `//rl/harness:rl-harness` binary (see rl.harness.commands.cli)."""

from rl.harness.commands import cli

cli.entry_point()
