"""The one redaction layer: secrets never reach a record, a log line or an error message.

    from rl.harness.run import redaction

    redaction.register_secret(api_key)             # once, where the secret is read
    redaction.register_environment_secrets()       # the B2 key, every *_API_KEY, *_TOKEN, *SECRET* set
    redaction.redact(f"GET ...?key={api_key}")     # -> "GET ...?key=[REDACTED]"
    redaction.install_log_filter("", "b2sdk")      # every record of these loggers and their handlers
    redaction.credential_in(open("id_rsa", "rb").read())   # "a private key block" (or None)
    redaction.credential_name("ppo/api_key")       # True: a name for a secret, not a hyperparameter

Secrets are registered where they are read (the B2 key from the environment or its file, the
vast.ai API key, a git token, the Ray cluster's token) or found in the environment; `redact` also
masks credential-shaped text it has never been told about (`Authorization: Bearer ...`,
`api_key=...`, and known token shapes: `ghp_...`, `AKIA...`, `sk-...`, ...), because a server may
echo a header back in an error body and a user may paste a token into a `--set` value. The harness (its manifest, traceback.txt, log) and
rl.devops both redact through this module.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping

from rl.harness import env_vars
from rl.harness.errors import UsageError

MASK = "[REDACTED]"
# A secret shorter than this would mask ordinary words; real keys are far longer.
MIN_SECRET_LENGTH = 8

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s'\",;]+"),
    re.compile(
        r"(?i)((?:api[_-]?key|access[_-]?token|token|secret|password|application[_-]?key)"
        r"[\"']?\s*[=:]\s*[\"']?)[^\s'\",;&]+"
    ),
)

# Text that is a credential wherever it appears: what it is, and its shape. `redact` masks these in
# any text; `credential_in` looks for them in a file's content (and `_ASSIGNED_SECRET` too).
_TOKEN_SHAPES = (
    (
        "a private key block",
        (
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
            r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----)?"
        ),
    ),
    ("an AWS access key id", r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("a GitHub token", r"\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("an OpenAI or Anthropic key", r"\bsk-(ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("a Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("a Backblaze B2 application key", r"\bK00[0-9A-Za-z+/]{28}\b"),
    ("a JSON web token", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
)
# A long literal assigned to a secret-named variable in code or configuration
# (`AWS_SECRET_ACCESS_KEY = "..."`, `db_password: ...`); short values and expressions are not secrets.
_ASSIGNED_SECRET = (
    "a value assigned to a secret's name",
    (
        r"(?i)\b\w*(secret|password|passwd|token|api_?key|access_?key|private_?key)\w*[\"']?\s*[=:]\s*"
        r"[\"']?[A-Za-z0-9/+=_-]{16,}"
    ),
)
_TOKEN_TEXT = tuple(re.compile(shape) for _, shape in _TOKEN_SHAPES)
_CREDENTIAL_CONTENT = tuple((what, re.compile(shape.encode())) for what, shape in (*_TOKEN_SHAPES, _ASSIGNED_SECRET))

# A `<namespace>/<field>` whose field names a secret (ppo/api_key, wandb/token, db/password).
_CREDENTIAL_FIELD = re.compile(
    r"(.*_)?(api_?key|access_?key|secret(_access)?(_key)?|password|passwd|passphrase|"
    r"token|auth|credentials?|private_key)"
)

_lock = threading.Lock()
_secrets: set[str] = set()


class SecretTooShort(UsageError, ValueError):
    """A secret too short to mask without masking ordinary words; the message names the fix."""


def register_secret(value: str) -> None:
    """Adds `value` to the strings `redact` masks; SecretTooShort for a value too short to mask safely."""
    if len(value) < MIN_SECRET_LENGTH:
        raise SecretTooShort(
            f"a secret of {len(value)} characters is too short to redact safely (minimum "
            f"{MIN_SECRET_LENGTH}); check that the key file or variable holds the whole key"
        )
    with _lock:
        _secrets.add(value)


def register_environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Registers the value of each secret variable (`env_vars.secret_variables`).

    Returns the names of those too short to mask safely (left unregistered, for the caller to warn about).
    """
    too_short = []
    for name, value in sorted(env_vars.secret_variables(environ).items()):
        try:
            register_secret(value)
        except SecretTooShort:
            too_short.append(name)
    return too_short


def forget_secrets() -> None:
    """Clears the registered secrets (tests register their own keys)."""
    with _lock:
        _secrets.clear()


def registered_secrets() -> list[str]:
    """The registered secrets, longest first (one may contain another)."""
    with _lock:
        return sorted(_secrets, key=len, reverse=True)


def redact(text: object) -> str:
    """`text` as a string with every registered secret and credential-shaped value masked."""
    result = str(text)
    for secret in registered_secrets():
        result = result.replace(secret, MASK)
    for pattern in _PATTERNS:
        result = pattern.sub(lambda match: match.group(1) + MASK, result)
    for pattern in _TOKEN_TEXT:
        result = pattern.sub(MASK, result)
    return result


def redact_all(texts: Iterable[str]) -> tuple[str, ...]:
    """Each of `texts` redacted (an argv, a list of --set assignments)."""
    return tuple(redact(text) for text in texts)


def truncate(text: str, limit: int) -> str:
    """The first `limit` characters (the last ones for a negative limit) of `text`, redacted first.

    Redacting after cutting would miss a secret cut in two and print its surviving half.
    """
    redacted = redact(text)
    return redacted[limit:] if limit < 0 else redacted[:limit]


def credential_in(content: bytes) -> str | None:
    """What credential `content` holds (a private key block, a known token format, a registered secret), or None."""
    for what, pattern in _CREDENTIAL_CONTENT:
        if pattern.search(content):
            return what
    if any(secret.encode() in content for secret in registered_secrets()):
        return "the value of a registered secret"
    return None


def credential_name(name: str) -> bool:
    """True when the field of `<namespace>/<field>` names a secret (api_key, token, password, ...)."""
    return bool(_CREDENTIAL_FIELD.fullmatch(name.rpartition("/")[2].lower()))


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's final message (installed by `install_log_filter`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def redact_handler(handler: logging.Handler) -> None:
    """Every record `handler` emits is redacted first (whichever logger it came from)."""
    if not any(isinstance(f, RedactingFilter) for f in handler.filters):
        handler.addFilter(RedactingFilter())


def install_log_filter(*logger_names: str) -> None:
    """Redacts every record of the named loggers (and their handlers), e.g. "", "vastai", "b2sdk"."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
        for handler in logger.handlers:
            redact_handler(handler)
