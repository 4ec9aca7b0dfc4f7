"""The account client against the fake API: the SDK's endpoints, injected faults, redacted errors."""

import time

import pytest

from rl.devops.vast import api, redact
from rl.devops.vast.testing import fake_api
from rl.devops.vast.testing.leaks import assert_no_secret


def _create(account, offer_id=1):
    return account.create_instance(
        offer_id,
        image="python:3.11-bookworm",
        disk_gb=40,
        label="rlh-t-000-1",
        onstart="#!/bin/bash\necho hi\n",
        env={"B2_APPLICATION_KEY": "b2-secret-abcdef"},
    )


def test_the_sdk_endpoints_round_trip(account, fake, api_key):
    instance_id = _create(account).instance_id
    (create,) = fake.calls("PUT", r"^/api/v0/asks/1/$")
    assert create.headers["authorization"] == f"Bearer {api_key}"  # the SDK sent the key as a header
    assert create.body["runtype"] == "ssh_direc ssh_proxy" and create.body["label"] == "rlh-t-000-1"
    assert create.body["onstart"].startswith("#!/bin/bash") and create.body["disk"] == 40
    row = account.instance(instance_id)
    assert row["actual_status"] == "running" and api.ssh_endpoint(row) == ("127.0.0.1", row["ssh_port"])
    assert [r["id"] for r in account.instances()] == [instance_id]
    fake.set_logs(instance_id, "one\ntwo\nthree\n")
    assert account.logs(instance_id, tail=2) == "two\nthree\n"
    account.destroy_instance(instance_id)
    assert account.instance(instance_id) is None


def test_listing_follows_pages(account, fake):
    for offer_id in range(1, 5):
        fake.offers[offer_id]["rented"] = False
    fake.offers.update({i: fake_api.offer(i) for i in range(5, 31)})
    created = [_create(account, offer_id).instance_id for offer_id in range(1, 31)]
    assert [r["id"] for r in account.instances()] == created  # 30 rows over two pages of 25
    assert len(fake.calls("GET", r"^/api/v1/instances/$")) == 2


def _labels_checked_between_creates(fake) -> list[str]:
    """The create (PUT /asks/) and label check (GET /api/v1/instances/) requests, in order."""
    return [
        "create" if r.method == "PUT" else "check"
        for r in fake.requests
        if (r.method, r.path) == ("GET", "/api/v1/instances/") or r.path.startswith("/api/v0/asks/")
    ]


def test_429_then_success_is_retried_after_a_label_check(account, fake):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.status(429), times=1)
    created = _create(account)
    assert created.attempts == 2 and not created.adopted
    assert _labels_checked_between_creates(fake) == ["create", "check", "create"]


def test_a_500_on_a_read_is_retried(account, fake):
    fake.add_fault("GET", r"^/api/v1/instances/$", fake_api.Fault.status(500), times=2)
    assert account.instances() == []
    assert len(fake.calls("GET", r"^/api/v1/instances/$")) == 3


@pytest.mark.parametrize("code", [500, 502, 504])  # the SDK itself would resend after 502-504
def test_a_create_whose_answer_is_lost_adopts_the_instance_instead_of_renting_twice(account, fake, code):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.after_acting(code), times=1)
    created = _create(account)
    assert created.adopted and created.attempts == 1
    assert [row["label"] for row in fake.instances.values()] == ["rlh-t-000-1"]  # rented once
    assert created.instance_id in fake.instances
    assert _labels_checked_between_creates(fake) == ["create", "check"]


def test_a_500_on_create_is_retried_only_once_the_label_is_not_found(account, fake):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.status(500), times=1)
    created = _create(account)
    assert created.attempts == 2 and not created.adopted and len(fake.instances) == 1
    assert _labels_checked_between_creates(fake) == ["create", "check", "create"]


def test_a_create_failing_every_attempt_says_nothing_was_rented(account, fake):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.status(500), times=3)
    with pytest.raises(
        redact.DevopsError,
        match=r"HTTPError: 500 .*no instance has label rlh-t-000-1, so nothing "
        r"was rented \(3 attempts\)",
    ):
        _create(account)
    assert fake.instances == {}
    assert _labels_checked_between_creates(fake) == ["create", "check"] * 3


def test_a_create_whose_label_cannot_be_checked_has_an_unknown_outcome(account, fake):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.after_acting(502), times=1)
    fake.add_fault("GET", r"^/api/v1/instances/$", fake_api.Fault.status(500), times=3)
    with pytest.raises(api.CreateOutcomeUnknown, match="run `reap` once vast.ai answers"):
        _create(account)
    assert len(fake.calls("PUT", r"/asks/")) == 1  # no blind retry


def test_a_refused_create_is_not_retried(account, fake):
    fake.add_fault("PUT", r"/asks/", fake_api.Fault.status(400), times=1)
    with pytest.raises(redact.DevopsError, match="create an instance from offer 1: HTTPError: 400"):
        _create(account)
    assert len(fake.calls("PUT", r"/asks/")) == 1 and fake.calls("GET", r"^/api/v1/instances/$") == []


def test_timeouts_end_in_an_error_after_bounded_retries(api_key, fake):
    slow = api.VastAccount(api_key, fake.url, request_timeout_s=0.2, retries=2, retry_backoff_s=0.01)
    fake.add_fault("GET", r"/instances/", fake_api.Fault.delay(1.0), times=10)
    started = time.monotonic()
    with pytest.raises(redact.DevopsError, match="list instances: ReadTimeout"):
        slow.instances()
    assert time.monotonic() - started < 5


def test_a_wrong_key_is_a_401_that_does_not_show_the_key(fake, api_key):
    wrong = "wrongkey-" + "0" * 30
    account = api.VastAccount(wrong, fake.url, request_timeout_s=2, retries=1)
    with pytest.raises(redact.DevopsError) as caught:
        account.instances()
    assert "401" in str(caught.value)
    assert_no_secret(wrong, caught.value)


def test_an_unavailable_offer_says_so(account, fake):
    _create(account)
    with pytest.raises(redact.DevopsError, match="no_such_ask"):
        _create(account)


@pytest.mark.parametrize(
    "method, path, call",
    [
        ("POST", r"/bundles/", lambda a: a.search_offers({}, order="score-", limit=5, disk_gb=10)),
        ("PUT", r"/asks/", _create),
        ("GET", r"^/api/v0/instances/", lambda a: a.instance(70001)),
        ("GET", r"^/api/v1/instances/", lambda a: a.instances()),
        ("PUT", r"/request_logs/", lambda a: a.logs(70001, tail=10)),
        ("DELETE", r"/instances/", lambda a: a.destroy_instance(70001)),
    ],
)
def test_every_endpoint_error_is_redacted_even_when_the_server_echoes_the_key(
    account, fake, api_key, method, path, call, capfd
):
    fake.add_fault(method, path, fake_api.Fault.echo_credentials(), times=10)
    with pytest.raises(redact.DevopsError) as caught:
        call(account)
    assert "server said" in str(caught.value)  # the body was included, and redacted
    assert_no_secret(api_key, caught.value, "".join(capfd.readouterr()))


def test_the_key_comes_from_the_environment_or_a_file_never_argv(tmp_path, monkeypatch):
    key_file = tmp_path / "key"
    key_file.write_text("filekey-0123456789\n")
    key_file.chmod(0o600)
    assert api.read_api_key(key_file) == "filekey-0123456789"
    monkeypatch.setenv(api.API_KEY_ENV, "envkey-0123456789")
    assert api.read_api_key(key_file) == "envkey-0123456789"
    assert redact.redact("filekey-0123456789 envkey-0123456789") == f"{redact.MASK} {redact.MASK}"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o622])
def test_a_key_file_open_to_other_users_is_refused(tmp_path, mode):
    key_file = tmp_path / "key"
    key_file.write_text("filekey-0123456789\n")
    key_file.chmod(mode)
    with pytest.raises(redact.DevopsError, match=f"open to other users \\(mode {mode:o}\\); run `chmod 600"):
        api.read_api_key(key_file)


def test_a_missing_key_names_the_fix(tmp_path):
    with pytest.raises(redact.DevopsError, match="export VAST_API_KEY or write the key"):
        api.read_api_key(tmp_path / "absent")
