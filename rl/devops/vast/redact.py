"""rl.devops's errors on the harness's one redaction layer (`rl.harness.run.redaction`).

    from rl.devops.vast import redact

    redact.register_secret(api_key)          # once, where the secret is read
    redact.redact(f"GET ...?key={api_key}")  # -> "GET ...?key=[REDACTED]"

    with redact.guarded("destroy instance 123"):
        sdk.destroy_instance(123)            # any exception -> DevopsError, message redacted

Secrets are registered where they are read (the vast.ai API key, B2 keys, a git token);
masking, the log filter and the credential shapes are the harness's (`redaction`), so a secret
registered here is masked in the harness's records too. `DevopsError` redacts its message when
it is built and `guarded` raises it `from None`, so no unredacted exception is chained behind it
for a traceback to print.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rl.harness.run import redaction

# The harness's one redaction layer, offered as this package's own names.
MASK, MIN_SECRET_LENGTH, RedactingFilter = redaction.MASK, redaction.MIN_SECRET_LENGTH, redaction.RedactingFilter
forget_secrets, install_log_filter = redaction.forget_secrets, redaction.install_log_filter
redact, truncate = redaction.redact, redaction.truncate


class DevopsError(RuntimeError):
    """An error of rl.devops whose message is already redacted (safe to print or record)."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class BadInput(DevopsError):
    """A launch asked for something it cannot have (found before anything is rented): exit status 2."""


def register_secret(value: str) -> None:
    """Adds `value` to the strings `redact` masks; DevopsError for a value too short to mask safely."""
    try:
        redaction.register_secret(value)
    except redaction.SecretTooShort as error:
        raise DevopsError(str(error)) from None


def describe(error: BaseException) -> str:
    """A redacted description of `error`: type, message, and the body of an HTTP error's response."""
    message = str(error).strip() or "no message"
    response = getattr(error, "response", None)
    body = getattr(response, "text", None)
    if isinstance(body, str) and body.strip():
        message += f" (server said: {truncate(body.strip(), 300)})"
    return redact(f"{type(error).__name__}: {message}")


@contextlib.contextmanager
def guarded(what: str) -> Iterator[None]:
    """Turns any exception inside into a `DevopsError` saying what failed, redacted, unchained."""
    try:
        yield
    except DevopsError as error:
        raise DevopsError(f"{what}: {error}") from None
    except Exception as error:  # noqa: BLE001 - every error path must be redacted
        raise DevopsError(f"{what}: {describe(error)}") from None
