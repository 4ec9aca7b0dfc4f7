"""Every harness test runs without the developer's B2 credentials (auto-upload must never fire)."""

import pytest

from rl.harness import b2_mirror


@pytest.fixture(autouse=True)
def _no_b2_credentials(monkeypatch, tmp_path_factory):
    for name in (b2_mirror.KEY_ID_ENV, b2_mirror.KEY_ENV, b2_mirror.BUCKET_ENV, b2_mirror.PREFIX_ENV,
                 b2_mirror.CREDENTIALS_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
