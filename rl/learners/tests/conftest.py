"""Registers the `slow` marker: learning tests carry it (Bazel also tags their targets `slow`)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: trains agents or starts Ray; minutes, not seconds")
