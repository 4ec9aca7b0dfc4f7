"""The one redaction function every error path, log line and progress line passes through.

    from rl.devops.vast import redact

    redact.register_secret(api_key)          # once, where the secret is read
    redact.redact(f"GET ...?key={api_key}")  # -> "GET ...?key=[REDACTED]"

    with redact.guarded("destroy instance 123"):
        sdk.destroy_instance(123)            # any exception -> DevopsError, message redacted

Secrets are registered where they are read (the vast.ai API key, B2 keys, a git
token); `redact` also masks credential-shaped text it has never been told about
(`Authorization: Bearer ...`, `api_key=...`), because a server may echo a header
back in an error body. `DevopsError` redacts its message when it is built and
`guarded` raises it `from None`, so no unredacted exception is chained behind it
for a traceback to print.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from typing import Iterator

MASK = "[REDACTED]"
# A secret shorter than this would mask ordinary words; real keys are far longer.
MIN_SECRET_LENGTH = 8

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s'\",;]+"),
    re.compile(r"(?i)((?:api[_-]?key|access[_-]?token|token|secret|password|application[_-]?key)"
               r"[\"']?\s*[=:]\s*[\"']?)[^\s'\",;&]+"),
)

_lock = threading.Lock()
_secrets: set[str] = set()


class DevopsError(RuntimeError):
    """An error of rl.devops whose message is already redacted (safe to print or record)."""

    def __init__(self, message: str):
        super().__init__(redact(message))


def register_secret(value: str) -> None:
    """Adds `value` to the strings `redact` masks; rejects a value too short to mask safely."""
    if len(value) < MIN_SECRET_LENGTH:
        raise DevopsError(
            f"a secret of {len(value)} characters is too short to redact safely (minimum "
            f"{MIN_SECRET_LENGTH}); check that the key file or variable holds the whole key")
    with _lock:
        _secrets.add(value)


def forget_secrets() -> None:
    """Clears the registered secrets (tests register their own keys)."""
    with _lock:
        _secrets.clear()


def redact(text: object) -> str:
    """`text` as a string with every registered secret and credential-shaped value masked."""
    result = str(text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)  # longest first: one may contain another
    for secret in secrets:
        result = result.replace(secret, MASK)
    for pattern in _PATTERNS:
        result = pattern.sub(lambda match: match.group(1) + MASK, result)
    return result


def truncate(text: str, limit: int) -> str:
    """The first `limit` characters (the last ones for a negative limit) of `text`, redacted first.

    Redacting after cutting would miss a secret cut in two and print its surviving half.
    """
    redacted = redact(text)
    return redacted[limit:] if limit < 0 else redacted[:limit]


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


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's final message (installed by `install_log_filter`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def install_log_filter(*logger_names: str) -> None:
    """Redacts every record of the named loggers (and their handlers), e.g. "vastai", "b2sdk"."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
        for handler in logger.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
