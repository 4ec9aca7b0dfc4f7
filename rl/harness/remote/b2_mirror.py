"""Optional mirror of a run's records to Backblaze B2 (set-up and layout: docs/artifact_storage.md).

    credentials = b2_mirror.load_credentials()       # environment, or a credentials file; None if neither
    mirror = b2_mirror.connect(credentials)
    record = mirror.upload_run(experiment="experiments.mess3.reward_only", layout=layout)   # a RunLayout
    # results/<run-id>/remote_artifacts.json now lists every key with its sha256 and size

Keys: `<prefix>/<experiment module>/[smoke/]<run-id>/{artifacts,results}/<relative path>`.
Each file is retried with exponential backoff; a file that still fails stops the upload
with UploadError, after the record of what did arrive is written. Local files are never
deleted. The key id and key never reach a record, a log line or an exception message.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from typing import Callable, Optional

from absl import logging

from rl.harness import settings
from rl.harness.errors import EXIT_UPLOAD_FAILED, HarnessError, UsageError
from rl.harness.run import provenance, records, redaction
from rl.harness.run.status import utc_now
from rl.harness.run.layout import RunLayout

# remote_artifacts.json has its own schema (it was the manifest's version 1 before the manifest went to 2).
REMOTE_ARTIFACTS_SCHEMA_VERSION = 1
DEFAULT_CREDENTIALS_FILE = "~/.config/rl-harness/b2.json"  # ~ is $HOME
DEFAULT_PREFIX = "rl-harness"
_REDACTED = "<redacted>"


class CredentialsError(UsageError, ValueError):
    """B2 credentials are incomplete or unreadable; the message names the fix (never the secret)."""


class UploadError(HarnessError, RuntimeError):
    """A file could not be uploaded after every retry; the local copy is untouched."""

    exit_status = EXIT_UPLOAD_FAILED


@dataclasses.dataclass(frozen=True)
class B2Credentials:
    key_id: str = dataclasses.field(repr=False)
    application_key: str = dataclasses.field(repr=False)
    bucket: str
    prefix: str
    source: str  # "environment" or the credentials file's path

    def redact(self, text: str) -> str:
        for secret in (self.application_key, self.key_id):
            text = text.replace(secret, _REDACTED)
        return text


def _from_file(path: str, environ) -> B2Credentials:
    try:
        mode = os.stat(path).st_mode
        with open(path) as handle:
            fields = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise CredentialsError(f"cannot read the B2 credentials file {path} ({type(error).__name__});"
                               f" fix it or unset ${settings.B2_CREDENTIALS_FILE_ENV}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logging.warning("B2 credentials file %s is readable by others; run `chmod 600 %s`", path, path)
    missing = [name for name in ("application_key_id", "application_key", "bucket") if not fields.get(name)]
    if missing:
        raise CredentialsError(f"B2 credentials file {path} lacks {', '.join(missing)};"
                               " see docs/artifact_storage.md for its format")
    return B2Credentials(
        key_id=fields["application_key_id"],
        application_key=fields["application_key"],
        bucket=fields["bucket"],
        prefix=environ.get(settings.B2_PREFIX_ENV) or fields.get("prefix") or DEFAULT_PREFIX,
        source=path,
    )


def _registered(credentials: B2Credentials) -> B2Credentials:
    """`credentials`, its key id and key registered with the redaction layer (from whichever source)."""
    for secret in (credentials.key_id, credentials.application_key):
        try:
            redaction.register_secret(secret)
        except redaction.SecretTooShort:
            logging.warning("a B2 credential from %s is shorter than %d characters, too short to mask safely: it is"
                            " not redacted from records", credentials.source, redaction.MIN_SECRET_LENGTH)
    return credentials


def register_secrets(environ=None) -> None:
    """Registers the configured B2 key (environment or file) for redaction, whether or not this run uploads.

    A key the run never uses can still be typed into a `--set` value; an unreadable configuration is
    left to the command that uploads, which names the fix.
    """
    try:
        load_credentials(environ)
    except CredentialsError:
        pass


def load_credentials(environ=None) -> Optional[B2Credentials]:
    """Credentials from the environment, else from the credentials file; None if neither is set up.

    Whatever it returns is registered with the redaction layer (`rl.harness.run.redaction`).

    Environment: $B2_APPLICATION_KEY_ID, $B2_APPLICATION_KEY, $RL_HARNESS_B2_BUCKET
    (and optionally $RL_HARNESS_B2_PREFIX). File: $RL_HARNESS_B2_CREDENTIALS_FILE or
    ~/.config/rl-harness/b2.json, a JSON object with application_key_id, application_key,
    bucket and optionally prefix.
    """
    environ = settings.b2_variables(environ)
    names = (settings.B2_KEY_ID_ENV, settings.B2_KEY_ENV, settings.B2_BUCKET_ENV)
    present = [name for name in names if environ.get(name)]
    if present and len(present) < len(names):
        missing = [name for name in names if name not in present]
        raise CredentialsError(f"B2 credentials are half set in the environment: set {', '.join(missing)}"
                               f" as well (or unset {', '.join(present)} to use the credentials file)")
    if present:
        return _registered(B2Credentials(
            key_id=environ[settings.B2_KEY_ID_ENV],
            application_key=environ[settings.B2_KEY_ENV],
            bucket=environ[settings.B2_BUCKET_ENV],
            prefix=environ.get(settings.B2_PREFIX_ENV) or DEFAULT_PREFIX,
            source="environment",
        ))
    explicit = environ.get(settings.B2_CREDENTIALS_FILE_ENV)
    path = os.path.expanduser(explicit) if explicit else DEFAULT_CREDENTIALS_FILE.replace("~", environ.get("HOME", "~"), 1)
    if explicit or os.path.exists(path):
        return _registered(_from_file(path, environ))
    return None


def connect(credentials: B2Credentials, *, api_config=None, **mirror_options) -> "B2Mirror":
    """Authorizes against B2 (or, with a RawSimulator `api_config`, against the in-process simulator)."""
    from b2sdk.v2 import B2Api, InMemoryAccountInfo

    api = B2Api(InMemoryAccountInfo(), **({"api_config": api_config} if api_config else {}))
    try:
        api.authorize_account("production", credentials.key_id, credentials.application_key)
        bucket = api.get_bucket_by_name(credentials.bucket)
    except Exception as error:  # b2sdk raises many types; none may leak a secret
        raise UploadError(f"cannot open B2 bucket {credentials.bucket!r}: {type(error).__name__}:"
                          f" {credentials.redact(str(error))}") from None
    return B2Mirror(bucket, credentials, **mirror_options)


class B2Mirror:
    def __init__(self, bucket, credentials: B2Credentials, *, attempts: int = 4, backoff_s: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep):
        self._bucket = bucket
        self._credentials = credentials
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._sleep = sleep

    def _upload_with_retries(self, path: str, key: str, sha256: str):
        for attempt in range(1, self._attempts + 1):
            try:
                return self._bucket.upload_local_file(local_file=path, file_name=key, file_info={"sha256": sha256})
            except Exception as error:  # b2sdk's errors share no useful base with OSError
                message = f"{type(error).__name__}: {self._credentials.redact(str(error))}"
                if attempt == self._attempts:
                    raise UploadError(f"uploading {path} to {key} failed {attempt} times; last: {message}") from None
                delay = self._backoff_s * 2 ** (attempt - 1)
                logging.warning("upload of %s failed (%s); retry %d/%d in %.1f s",
                                key, message, attempt, self._attempts - 1, delay)
                self._sleep(delay)

    def upload_run(self, *, experiment: str, layout: RunLayout) -> dict:
        """Uploads artifacts/<run-id>/ then results/<run-id>/; writes results/<run-id>/remote_artifacts.json."""
        run_prefix = layout.remote_prefix(self._credentials.prefix, experiment)
        results_dir, artifacts_dir = layout.results_dir, layout.artifacts_dir
        files = [("artifacts", artifacts_dir, path) for path in sorted(artifacts_dir.rglob("*"))]
        files += [("results", results_dir, path) for path in sorted(results_dir.rglob("*"))
                  if path.name != records.REMOTE_ARTIFACTS_FILE]
        files = [(kind, root, path) for kind, root, path in files if path.is_file() and not path.name.startswith(".tmp-")]
        record = {
            "schema_version": REMOTE_ARTIFACTS_SCHEMA_VERSION,
            "status": "uploading",
            "bucket": self._credentials.bucket,
            "run_prefix": run_prefix,
            "started_at": utc_now(),
            "files": [],
            "error": None,
            "not_uploaded": [],
        }
        record_path = str(results_dir / records.REMOTE_ARTIFACTS_FILE)
        try:
            for index, (kind, root, path) in enumerate(files):
                relative = f"{kind}/{path.relative_to(root).as_posix()}"
                key = f"{run_prefix}/{relative}"
                sha256 = provenance.file_sha256(str(path))
                try:
                    version = self._upload_with_retries(str(path), key, sha256)
                except UploadError as error:
                    record.update(status="failed", error={"file": relative, "message": str(error)},
                                  not_uploaded=[f"{k}/{p.relative_to(r).as_posix()}" for k, r, p in files[index:]])
                    raise
                record["files"].append({"key": key, "local": relative, "size": path.stat().st_size,
                                        "sha256": sha256, "file_id": getattr(version, "id_", None)})
            record["status"] = "complete"
        finally:
            if record["status"] == "uploading":  # an unexpected error (e.g. a file vanished)
                record["status"] = "failed"
            record["ended_at"] = utc_now()
            records.write_json_atomically(record_path, record)
        logging.info("uploaded %d files to b2://%s/%s", len(record["files"]), self._credentials.bucket, run_prefix)
        return record
