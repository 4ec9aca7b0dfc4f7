"""The one redaction function: registered secrets and credential-shaped text never survive it."""

import logging
import traceback

import pytest

from rl.devops.vast import redact


def test_registered_secrets_are_masked_wherever_they_appear():
    redact.register_secret("s3cr3t-value-123")
    assert redact.redact("a s3cr3t-value-123 b s3cr3t-value-123") == f"a {redact.MASK} b {redact.MASK}"


def test_a_secret_containing_another_is_masked_whole():
    redact.register_secret("abcdefgh")
    redact.register_secret("abcdefgh-longer")
    assert redact.redact("x abcdefgh-longer y") == f"x {redact.MASK} y"


@pytest.mark.parametrize(
    "text, kept",
    [
        ("Authorization: Bearer eyJhbGciOi.xyz", "Authorization: Bearer "),
        ("GET /x?api_key=abc123def&limit=3", "GET /x?api_key="),
        ('{"token": "ghp_abcdef123456"}', '{"token": "'),
        ("password=hunter2222 ok", "password="),
    ],
)
def test_credential_shaped_text_is_masked_without_registration(text, kept):
    result = redact.redact(text)
    assert result.startswith(kept + redact.MASK)


def test_a_too_short_secret_is_refused():
    with pytest.raises(redact.DevopsError, match="too short to redact safely"):
        redact.register_secret("abc")


def test_guarded_redacts_and_does_not_chain_the_original():
    redact.register_secret("key-0123456789")
    with pytest.raises(redact.DevopsError) as caught, redact.guarded("call the API"):
        raise ValueError("server echoed key-0123456789")
    error = caught.value
    assert str(error) == f"call the API: ValueError: server echoed {redact.MASK}"
    assert error.__cause__ is None and error.__suppress_context__
    printed = "".join(traceback.format_exception(error))
    assert "key-0123456789" not in printed


def test_describe_includes_a_redacted_response_body():
    redact.register_secret("key-0123456789")

    class Response:
        text = '{"msg": "bad key key-0123456789"}'

    error = RuntimeError("500 Server Error")
    error.response = Response()
    assert redact.describe(error) == f'RuntimeError: 500 Server Error (server said: {{"msg": "bad key {redact.MASK}"}})'


def test_a_secret_cut_by_truncation_leaves_no_half_behind():
    secret = "key-0123456789abcdefghij"
    redact.register_secret(secret)

    class Response:
        text = "x" * 290 + " " + secret  # the 300-character cut falls inside the secret

    error = RuntimeError("500 Server Error")
    error.response = Response()
    assert "key-01234" not in redact.describe(error)
    assert "fghij" not in redact.truncate(secret + " " + "y" * 390, -400)  # the cut falls inside it too


def test_log_filter_redacts_messages_arguments_and_tracebacks(caplog):
    redact.register_secret("key-0123456789")
    logger = logging.getLogger("rl.devops.redact_test")
    logger.addFilter(redact.RedactingFilter())
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info("using %s", "key-0123456789")
        try:
            raise ValueError("key-0123456789")
        except ValueError:
            logger.exception("failed")
    assert "key-0123456789" not in caplog.text
    assert caplog.records[0].getMessage() == f"using {redact.MASK}"
