"""Fixtures of the rl.devops tests: a fake vast.ai API, moto's S3 server as the store, and a guard that no request
leaves the machine."""

import secrets
import socket
import time

import pytest

from rl.devops.vast import api, bootstrap, redact
from rl.devops.vast.testing import fake_api, fake_instance
from rl.harness import env_vars

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Fails any test that opens a network connection to anything but this machine."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            raise AssertionError(f"a test tried to reach {address}: tests must stay on 127.0.0.1")

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    for variable in _PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for variable in (
        api.API_KEY_ENV,
        "VAST_URL",
        bootstrap.GIT_TOKEN_ENV,
        env_vars.B2_KEY_ID_ENV,
        env_vars.B2_KEY_ENV,
        env_vars.B2_BUCKET_ENV,
        env_vars.B2_PREFIX_ENV,
        env_vars.B2_CREDENTIALS_FILE_ENV,
    ):
        monkeypatch.delenv(variable, raising=False)
    yield
    redact.forget_secrets()


@pytest.fixture
def api_key():
    """A fresh secret per test, so a leak is attributable."""
    return "vastkey-" + secrets.token_hex(20)


@pytest.fixture
def fake(api_key):
    """A fake vast.ai API with four good offers (ids 1-4; offer 1 scores best)."""
    offers = [fake_api.offer(i, dph_total=round(0.30 + 0.05 * i, 2)) for i in range(1, 5)]
    with fake_api.FakeVastApi(api_key, offers, lifetime_s=60) as server:
        yield server


@pytest.fixture
def account(api_key, fake):
    """The client against the fake, with short timeouts and quick retries."""
    return api.VastAccount(api_key, fake.url, request_timeout_s=2.0, retries=3, retry_backoff_s=0.01)


@pytest.fixture
def disks(tmp_path):
    """The output folders of fake instances (by SSH port)."""
    return fake_instance.FakeDisks(tmp_path / "instances")


@pytest.fixture
def rsync(disks):
    """A CopyBack runner that copies from `disks` instead of over SSH."""
    return fake_instance.FakeRsync(disks)


@pytest.fixture(scope="module")
def server():
    """Moto's S3 server (the test tools' venv), for the tests whose target depends on //rl/harness:test_recipes."""
    from rl.harness.tests import s3_server  # only those targets carry it

    with s3_server.S3Server() as running:
        yield running


@pytest.fixture
def store_env(server, monkeypatch):
    """The store on this machine and on the instances: moto's bucket below a fresh prefix, the read-write key."""
    variables = server.store_env(f"devops-{time.time_ns()}")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return variables
