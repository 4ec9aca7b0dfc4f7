"""Every harness test runs without the developer's store credentials (auto-upload must never fire)."""

import pytest

from rl.harness import env_vars


@pytest.fixture(autouse=True)
def _no_store_credentials(monkeypatch, tmp_path_factory):
    for name in env_vars.STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
