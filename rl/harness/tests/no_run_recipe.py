"""A module without run(context), for the CLI's bad-input test."""

BUDGET = 1
