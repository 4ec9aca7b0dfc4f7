"""Every harness test runs without the developer's store credentials (auto-upload must never fire)."""

import pytest

from rl.harness import settings


@pytest.fixture(autouse=True)
def _no_store_credentials(monkeypatch, tmp_path_factory):
    for name in settings.STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
