"""The store a user configured, once: found in the environment or a chmod-600 file, opened and checked.

    config = stores.load()             # None when no store is configured; CredentialsError naming the fix
    store = stores.open_store(config)  # b2:// through b2sdk, s3:// through pyarrow (a store.Store)
    store.check()                      # StoreUnusable (exit 2) naming the variable or file to fix

Where a store is configured, first match wins:
1. $RL_HARNESS_STORE (`b2://bucket/prefix` or `s3://bucket/prefix`), $RL_HARNESS_STORE_ENDPOINT
   (s3 only), and the key in the scheme's own variables ($B2_APPLICATION_KEY_ID and
   $B2_APPLICATION_KEY; $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY);
2. the file $RL_HARNESS_STORE_FILE, else ~/.config/rl-harness/store.json:
   {"url": "s3://...", "endpoint": "http://...", "key_id": "...", "key": "..."};
3. B2's own variables or file (`b2_mirror.load_credentials`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from rl.harness import env_vars
from rl.harness.remote import b2_mirror, s3_store
from rl.harness.remote.store import CredentialsError, Store, StoreConfig, parse_url, read_credentials_file, registered

DEFAULT_STORE_FILE = "~/.config/rl-harness/store.json"  # ~ is $HOME
NO_STORE_FIX = f"set ${env_vars.STORE_ENV} and its key, or write {DEFAULT_STORE_FILE} (docs/artifact_storage.md)"
KEY_VARIABLES = {
    "b2": (env_vars.B2_KEY_ID_ENV, env_vars.B2_KEY_ENV),
    "s3": (env_vars.S3_KEY_ID_ENV, env_vars.S3_KEY_ENV),
}


def _from_environment(environ: Mapping[str, str]) -> StoreConfig:
    scheme, bucket, prefix = parse_url(environ[env_vars.STORE_ENV], f"${env_vars.STORE_ENV}")
    id_name, key_name = KEY_VARIABLES[scheme]
    missing = [f"${name}" for name in (id_name, key_name) if not environ.get(name)]
    if missing:
        raise CredentialsError(
            f"${env_vars.STORE_ENV} names a {scheme} store but {' and '.join(missing)} is not set;"
            f" set it, or unset ${env_vars.STORE_ENV}"
        )
    endpoint = environ.get(env_vars.STORE_ENDPOINT_ENV)
    if endpoint and scheme == "b2":
        raise CredentialsError(
            f"${env_vars.STORE_ENDPOINT_ENV} is for s3:// stores; unset it, or name B2's S3"
            f" endpoint with an s3:// ${env_vars.STORE_ENV}"
        )
    fixes = {
        "url": f"${env_vars.STORE_ENV}",
        "endpoint": f"${env_vars.STORE_ENDPOINT_ENV}" if scheme == "s3" else "the network (B2's address is fixed)",
        "credentials": f"${id_name} and ${key_name}",
    }
    return StoreConfig(
        scheme=scheme,
        bucket=bucket,
        prefix=prefix,
        key_id=environ[id_name],
        key=environ[key_name],
        source="environment",
        fixes=fixes,
        endpoint=endpoint,
    )


def _from_file(path: str) -> StoreConfig:
    fields = read_credentials_file(path, "store file", env_vars.STORE_FILE_ENV, ("url", "key_id", "key"))
    scheme, bucket, prefix = parse_url(fields["url"], f"url in {path}")
    return StoreConfig(
        scheme=scheme,
        bucket=bucket,
        prefix=prefix,
        key_id=fields["key_id"],
        key=fields["key"],
        source=path,
        fixes={role: f"the store file {path}" for role in ("url", "endpoint", "credentials")},
        endpoint=fields.get("endpoint"),
    )


def load(environ: Mapping[str, str] | None = None) -> StoreConfig | None:
    """The configured store (its key registered for redaction), or None; CredentialsError naming the fix."""
    variables = env_vars.store_variables(environ)
    if variables.get(env_vars.STORE_ENV):
        return registered(_from_environment(variables))
    explicit = variables.get(env_vars.STORE_FILE_ENV)
    path = os.path.expanduser(explicit) if explicit else DEFAULT_STORE_FILE.replace("~", variables.get("HOME", "~"), 1)
    if explicit or os.path.exists(path):
        return registered(_from_file(path))
    return b2_mirror.load_credentials(environ)


def register_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Registers the configured store's key for redaction, whether or not this run uses it.

    A key the run never uses can still be typed into a `--set` value; an unreadable configuration is
    left to the command that uses the store, which names the fix.
    """
    try:
        load(environ)
    except CredentialsError:
        pass


def open_store(config: StoreConfig, **store_options) -> Store:
    """The store of `config`: B2's native API for b2://, pyarrow's S3 client for s3://. Nothing is sent yet."""
    connect = b2_mirror.connect if config.scheme == "b2" else s3_store.connect
    return connect(config, **store_options)
