"""Every harness test runs without the developer's B2 credentials (auto-upload must never fire)."""

import pytest

from rl.harness import settings


@pytest.fixture(autouse=True)
def _no_b2_credentials(monkeypatch, tmp_path_factory):
    for name in (settings.B2_KEY_ID_ENV, settings.B2_KEY_ENV, settings.B2_BUCKET_ENV, settings.B2_PREFIX_ENV,
                 settings.B2_CREDENTIALS_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
