"""An object store that holds runs: its configuration, the operations every backend offers, and a run's upload.

    config = stores.load()              # rl.harness.remote.stores: environment or a chmod-600 file; None if neither
    store = stores.open_checked(config) # reachable, credentials good, bucket there, key may write: else StoreUnusable
    store.put_file(path, key, sha256, size)   # retried with backoff; UploadError after the last attempt

A store is named by a URL: `b2://bucket/prefix` (Backblaze B2's native API, `b2_mirror.B2Store`) or
`s3://bucket/prefix` with an endpoint (any S3-compatible server, `s3_store.S3Store`). Keys:
`<prefix>/<experiment module>/[smoke/]<run-id>/{artifacts,results}/<relative path>`. A backend moves
bytes; this module's `Store` retries and names faults; `run_mirror` sends a run. Every message a backend raises is
redacted: the key id and key never reach a record, a log line or an exception message.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Iterator, Mapping

from absl import logging

from rl.harness.errors import EXIT_UPLOAD_FAILED, HarnessError, UsageError
from rl.harness.run import redaction

DEFAULT_PREFIX = "rl-harness"
SCHEMES = ("b2", "s3")
_URL = re.compile(r"(?P<scheme>[a-z0-9]+)://(?P<bucket>[A-Za-z0-9][A-Za-z0-9._-]*)(?:/(?P<prefix>.*))?")
_REDACTED = "<redacted>"
# What a user fixes when a start-up check fails, one role each (StoreConfig.fixes).
ROLES = ("url", "endpoint", "credentials")


CHUNK_BYTES = 1 << 20  # what a store streams at a time: a file never sits whole in memory


def chunks_of_prefix(handle, size: int, name: str) -> Iterator[bytes]:
    """Yields the first `size` bytes of an open binary file (one that may still grow) in CHUNK_BYTES pieces;
    FileNotFoundError if it holds fewer (it was replaced meanwhile)."""
    left = size
    while left:
        chunk = handle.read(min(left, CHUNK_BYTES))
        if not chunk:
            raise FileNotFoundError(f"{name} shrank while it was read")
        yield chunk
        left -= len(chunk)


class CredentialsError(UsageError, ValueError):
    """A store's configuration is incomplete or unreadable; the message names the fix (never the secret)."""


class StoreUnusable(UsageError):
    """A start-up check failed (unreachable, credentials refused, no such bucket, no write access): exit 2."""


class UploadError(HarnessError, RuntimeError):
    """A store operation failed after every retry; the local copy is untouched."""

    exit_status = EXIT_UPLOAD_FAILED


class StoreFault(Exception):
    """A backend's failed operation: `kind` is one of "unreachable", "credentials", "bucket", "denied",
    "missing" or "other"; the message is redacted."""

    def __init__(self, kind: str, message: str):
        super().__init__(" ".join(message.split()))  # one line, whatever the client's text holds
        self.kind = kind


def parse_url(url: str, variable: str) -> tuple[str, str, str]:
    """`b2://bucket/prefix` -> ("b2", "bucket", "prefix"); CredentialsError naming `variable` otherwise."""
    match = _URL.fullmatch(url.strip())
    if not match or match["scheme"] not in SCHEMES:
        raise CredentialsError(
            f"{variable}={url!r} is not a store URL; write b2://<bucket>/<prefix> or"
            " s3://<bucket>/<prefix> (docs/artifact_storage.md)"
        )
    return match["scheme"], match["bucket"], (match["prefix"] or DEFAULT_PREFIX).strip("/") or DEFAULT_PREFIX


def read_credentials_file(path: str, what: str, variable: str, required: tuple[str, ...]) -> dict:
    """The JSON object in `path` (`what`: "store file", "B2 credentials file"), with every `required` field;
    CredentialsError naming the fix (`variable` picks another file). Warns unless only the user may read it."""
    try:
        mode = os.stat(path).st_mode
        with open(path) as handle:
            fields = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise CredentialsError(
            f"cannot read the {what} {path} ({type(error).__name__}); fix it or unset ${variable}"
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logging.warning("%s %s is readable by others; run `chmod 600 %s`", what, path, path)
    missing = [name for name in required if not fields.get(name)]
    if missing:
        raise CredentialsError(f"{what} {path} lacks {', '.join(missing)}; see docs/artifact_storage.md for its format")
    return fields


@dataclasses.dataclass(frozen=True)
class StoreConfig:
    """Where runs go and the key that may write there. `fixes` names, per role in ROLES, what the user
    edits when that part is wrong (a variable or the credentials file)."""

    scheme: str
    bucket: str
    prefix: str
    key_id: str = dataclasses.field(repr=False)
    key: str = dataclasses.field(repr=False)
    source: str  # "environment" or the credentials file's path
    fixes: Mapping[str, str] = dataclasses.field(repr=False, compare=False)
    endpoint: str | None = None  # s3 only: the server's URL; None is AWS itself

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}"

    def redact(self, text: str) -> str:
        for secret in (self.key, self.key_id):
            text = text.replace(secret, _REDACTED)
        return text


def registered(config: StoreConfig) -> StoreConfig:
    """`config`, its key id and key registered with the redaction layer (from whichever source)."""
    for secret in (config.key_id, config.key):
        try:
            redaction.register_secret(secret)
        except redaction.SecretTooShort:
            logging.warning(
                "a store credential from %s is shorter than %d characters, too short to mask safely: it"
                " is not redacted from records",
                config.source,
                redaction.MIN_SECRET_LENGTH,
            )
    return config


class Store:
    """One store's operations; a backend implements the underscored ones, each raising StoreFault."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        attempts: int = 4,
        backoff_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._sleep = sleep

    # -- what a backend provides ----------------------------------------------------------------
    def _put_file(self, path: str, key: str, sha256: str, size: int) -> str | None:
        """Uploads the first `size` bytes of `path` (a file that may be growing) as `key`; returns the store's
        version id, if it has one."""
        raise NotImplementedError

    def _put_bytes(self, data: bytes, key: str) -> None:
        raise NotImplementedError

    def _get_file(self, key: str, path: str) -> None:
        """Downloads `key` into `path` (a new file; the caller renames it into place)."""
        raise NotImplementedError

    def _list(self, prefix: str) -> dict[str, int]:
        """{key: size} of every object whose key starts with `prefix`/."""
        raise NotImplementedError

    def _delete(self, key: str) -> None:
        raise NotImplementedError

    # -- what the harness uses ------------------------------------------------------------------
    def check(self, *, write: bool = True) -> None:
        """Lists the prefix, then (with `write`) writes one probe object and deletes it where the key may:
        StoreUnusable naming the fix otherwise. A key that may write but not delete (a launch's key,
        rl/devops/vast) is all a run needs; its probe stays, a few bytes."""
        probe = f"{self.config.prefix}/.rl-harness-write-check-{secrets.token_hex(6)}"
        stage = "list"
        try:
            self._list(self.config.prefix)
            if not write:
                return
            stage = "write"
            self._put_bytes(b"rl-harness write check\n", probe)
            stage = "delete"
            self._delete(probe)
        except StoreFault as fault:
            if stage == "delete" and fault.kind == "denied":
                return
            raise StoreUnusable(self._unusable(fault, stage)) from None

    def _unusable(self, fault: StoreFault, stage: str) -> str:
        fixes, where = self.config.fixes, self.config.url
        if fault.kind == "unreachable":
            return f"store {where} is unreachable ({fault}); fix {fixes['endpoint']}"
        if fault.kind == "credentials":
            return f"store {where} refused the key ({fault}); fix {fixes['credentials']}"
        if fault.kind == "bucket":
            return f"store {where}: bucket {self.config.bucket!r} does not exist ({fault}); create it or fix {fixes['url']}"
        if fault.kind == "denied" and stage == "write":
            return (
                f"store {where}: the key may not write there ({fault}); give it write access"
                f" or fix {fixes['credentials']}"
            )
        return f"store {where} cannot be used ({fault}); fix {fixes['credentials']} or {fixes['url']}"

    def list_keys(self, prefix: str) -> dict[str, int]:
        """{key: size} under `prefix` (a key folder, no trailing slash); UploadError after every retry."""
        return self._retried(f"listing {prefix}", lambda: self._list(prefix))

    def put_file(self, path: str, key: str, sha256: str, size: int, *, attempts: int | None = None) -> str | None:
        """Uploads the first `size` bytes of `path` as `key`, tried `attempts` times (default: the store's)."""
        return self._retried(f"uploading {path} to {key}", lambda: self._put_file(path, key, sha256, size), attempts)

    def put_bytes(self, data: bytes, key: str, *, attempts: int | None = None) -> None:
        self._retried(f"uploading {key}", lambda: self._put_bytes(data, key), attempts)

    def get_file(self, key: str, path: str, *, attempts: int | None = None) -> None:
        """Downloads `key` into `path` (a new file)."""
        self._retried(f"downloading {key}", lambda: self._get_file(key, path), attempts)

    def _retried(self, what: str, operation: Callable, attempts: int | None = None):
        attempts = attempts or self._attempts
        for attempt in range(1, attempts + 1):
            try:
                return operation()
            except StoreFault as fault:
                if attempt == attempts:
                    raise UploadError(f"{what} failed {attempt} times; last: {fault}") from None
                delay = self._backoff_s * 2 ** (attempt - 1)
                logging.warning("%s failed (%s); retry %d/%d in %.1f s", what, fault, attempt, attempts - 1, delay)
                self._sleep(delay)
