"""Backblaze B2 through its native API (b2sdk): the `b2://bucket/prefix` store, and B2's own variables.

    config = b2_mirror.load_credentials()       # $B2_APPLICATION_KEY_ID, ..., or ~/.config/rl-harness/b2.json; None if neither
    store = b2_mirror.connect(config)           # a store.Store (it authorizes on its first operation)

b2sdk, not B2's S3 endpoint, because only the native API does what B2 alone offers (keys restricted
to a bucket and a prefix, made per launch: rl/devops/vast). The key id and key never reach a record,
a log line or an exception message.
"""

from __future__ import annotations

import os

from rl.harness import env_vars
from rl.harness.remote.store import (
    DEFAULT_PREFIX,
    CredentialsError,
    Store,
    StoreConfig,
    StoreFault,
    read_credentials_file,
    registered,
)

DEFAULT_CREDENTIALS_FILE = "~/.config/rl-harness/b2.json"  # ~ is $HOME


def _fixes(source: str) -> dict[str, str]:
    if source != "environment":
        return {role: f"the credentials file {source}" for role in ("url", "endpoint", "credentials")}
    return {
        "url": f"${env_vars.B2_BUCKET_ENV}",
        "endpoint": "the network (B2 itself is not configurable)",
        "credentials": f"${env_vars.B2_KEY_ID_ENV} and ${env_vars.B2_KEY_ENV}",
    }


def b2_config(key_id: str, key: str, bucket: str, prefix: str, source: str) -> StoreConfig:
    return StoreConfig(
        scheme="b2",
        bucket=bucket,
        prefix=prefix.strip("/") or DEFAULT_PREFIX,
        key_id=key_id,
        key=key,
        source=source,
        fixes=_fixes(source),
    )


def _from_file(path: str, environ) -> StoreConfig:
    fields = read_credentials_file(
        path,
        "B2 credentials file",
        env_vars.B2_CREDENTIALS_FILE_ENV,
        ("application_key_id", "application_key", "bucket"),
    )
    return b2_config(
        fields["application_key_id"],
        fields["application_key"],
        fields["bucket"],
        environ.get(env_vars.B2_PREFIX_ENV) or fields.get("prefix") or DEFAULT_PREFIX,
        path,
    )


def load_credentials(environ=None) -> StoreConfig | None:
    """B2 from its own variables, else from the B2 credentials file; None if neither is set up.

    Whatever it returns is registered with the redaction layer (`rl.harness.run.redaction`).

    Environment: $B2_APPLICATION_KEY_ID, $B2_APPLICATION_KEY, $RL_HARNESS_B2_BUCKET
    (and optionally $RL_HARNESS_B2_PREFIX). File: $RL_HARNESS_B2_CREDENTIALS_FILE or
    ~/.config/rl-harness/b2.json, a JSON object with application_key_id, application_key,
    bucket and optionally prefix.
    """
    environ = env_vars.store_variables(environ)
    names = (env_vars.B2_KEY_ID_ENV, env_vars.B2_KEY_ENV, env_vars.B2_BUCKET_ENV)
    present = [name for name in names if environ.get(name)]
    if present and len(present) < len(names):
        missing = [name for name in names if name not in present]
        raise CredentialsError(
            f"B2 credentials are half set in the environment: set {', '.join(missing)}"
            f" as well (or unset {', '.join(present)} to use the credentials file)"
        )
    if present:
        return registered(
            b2_config(
                environ[env_vars.B2_KEY_ID_ENV],
                environ[env_vars.B2_KEY_ENV],
                environ[env_vars.B2_BUCKET_ENV],
                environ.get(env_vars.B2_PREFIX_ENV) or DEFAULT_PREFIX,
                "environment",
            )
        )
    explicit = environ.get(env_vars.B2_CREDENTIALS_FILE_ENV)
    path = (
        os.path.expanduser(explicit) if explicit else DEFAULT_CREDENTIALS_FILE.replace("~", environ.get("HOME", "~"), 1)
    )
    if explicit or os.path.exists(path):
        return registered(_from_file(path, environ))
    return None


def _fault(error: Exception, config: StoreConfig) -> StoreFault:
    from b2sdk.v2 import exception as b2_exceptions

    tries = ""
    if isinstance(error, b2_exceptions.MaxRetriesExceeded) and error.exception_info_list:
        # an upload's retries end here: what the last attempt met decides, and names the fault
        error, tries = error.exception_info_list[-1], f" (after {error.limit} tries)"
    message = f"{type(error).__name__}: {config.redact(str(error))}{tries}"
    if isinstance(error, (b2_exceptions.B2ConnectionError, b2_exceptions.ConnectionReset)):
        return StoreFault("unreachable", message)
    if isinstance(error, b2_exceptions.NonExistentBucket):
        return StoreFault("bucket", message)
    if isinstance(error, (b2_exceptions.InvalidAuthToken, b2_exceptions.MissingAccountData)):
        return StoreFault("credentials", message)
    if isinstance(error, (b2_exceptions.Unauthorized, b2_exceptions.AccessDenied)):
        return StoreFault("denied", message)
    if isinstance(error, b2_exceptions.FileNotPresent):
        return StoreFault("missing", message)
    return StoreFault("other", message)


def connect(config: StoreConfig, *, api_config=None, **store_options) -> B2Store:
    """The B2 store of `config` (with a RawSimulator `api_config`, the in-process simulator); it authorizes
    on its first operation."""
    from b2sdk.v2 import B2Api, InMemoryAccountInfo

    return B2Store(
        B2Api(InMemoryAccountInfo(), **({"api_config": api_config} if api_config else {})), config, **store_options
    )


class B2Store(Store):
    def __init__(self, api, config: StoreConfig, **store_options):
        super().__init__(config, **store_options)
        self._api = api
        self._bucket = None

    def _call(self, operation):
        if self._bucket is None:
            try:
                self._api.authorize_account("production", self.config.key_id, self.config.key)
            except Exception as error:  # noqa: BLE001 - b2sdk raises many types; none may leak a secret
                fault = _fault(error, self.config)
                raise StoreFault("unreachable" if fault.kind == "unreachable" else "credentials", str(fault)) from None
            try:
                self._bucket = self._api.get_bucket_by_name(self.config.bucket)
            except Exception as error:  # noqa: BLE001 - as above: every b2sdk error becomes a redacted StoreFault
                raise _fault(error, self.config) from None
        try:
            return operation(self._bucket)
        except Exception as error:  # noqa: BLE001 - b2sdk's errors share no useful base with OSError
            raise _fault(error, self.config) from None

    def _put_file(self, path: str, key: str, sha256: str, size: int) -> str | None:
        from b2sdk.v2 import UploadSourceLocalFileRange

        return self._call(
            lambda bucket: bucket.upload(
                UploadSourceLocalFileRange(path, length=size), key, file_info={"sha256": sha256}
            )
        ).id_

    def _put_bytes(self, data: bytes, key: str) -> None:
        self._call(lambda bucket: bucket.upload_bytes(data, key))

    def _get_file(self, key: str, path: str) -> None:
        self._call(lambda bucket: bucket.download_file_by_name(key).save_to(path))

    def _list(self, prefix: str) -> dict[str, int]:
        return self._call(
            lambda bucket: {version.file_name: version.size for version, _ in bucket.ls(prefix + "/", recursive=True)}
        )

    def _delete(self, key: str) -> None:
        self._call(
            lambda bucket: [
                bucket.delete_file_version(version.id_, key)
                for version, _ in bucket.ls(key, recursive=False)
                if version.file_name == key
            ]
        )
