"""b2sdk's in-process RawSimulator, made to enforce a restricted key's bucket and name prefix on uploads.

    from rl.devops.vast.testing import b2_simulator

    bucket, credentials = b2_simulator.bucket("rl-artifacts")      # authorized with the account's master key
    instance_bucket = b2_simulator.open_bucket(bucket, key_id, application_key)   # as an instance would

B2 refuses an upload outside a key's name prefix. The simulator of b2sdk 2.x does not check it
on uploads, and refuses every upload of a key restricted to a bucket (it checks such calls
against no bucket), so tests of restricted keys use this subclass.
Its application keys are long enough to register for redaction, as real ones are.
"""

from __future__ import annotations

from b2sdk.v2 import B2Api, B2HttpApiConfig, InMemoryAccountInfo, RawSimulator
from b2sdk.v2.exception import Unauthorized

from rl.harness.remote import b2_mirror

# The simulator names keys appKey<N>; from here on they are as long as a secret must be to be masked.
_FIRST_KEY_NUMBER = 10**7


class RestrictingSimulator(RawSimulator):
    """RawSimulator with B2's checks of a restricted key on uploads (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.app_key_counter = _FIRST_KEY_NUMBER
        self._upload_url_keys = {}

    def _assert_account_auth(self, api_url, account_auth_token, account_id, capability, bucket_id=None, file_name=None):
        # The simulator names no bucket for uploads and listings of unfinished files: those calls are
        # checked against the key's own bucket (these tests have one bucket).
        key = self.auth_token_to_key.get(account_auth_token)
        if bucket_id is None and key is not None:
            bucket_id = key.bucket_id_or_none
        super()._assert_account_auth(api_url, account_auth_token, account_id, capability, bucket_id, file_name)

    def get_upload_url(self, api_url, account_auth_token, bucket_id):
        answer = super().get_upload_url(api_url, account_auth_token, bucket_id)
        self._upload_url_keys[answer["uploadUrl"]] = self.auth_token_to_key[account_auth_token]
        return answer

    def upload_file(self, upload_url, upload_auth_token, file_name, *args, **kwargs):
        prefix = self._upload_url_keys[upload_url].name_prefix_or_none
        if prefix is not None and not file_name.startswith(prefix):
            raise Unauthorized(f"{file_name} is outside the key's prefix {prefix}", "unauthorized")
        return super().upload_file(upload_url, upload_auth_token, file_name, *args, **kwargs)


def _api(simulator=None) -> B2Api:
    api = B2Api(InMemoryAccountInfo(), api_config=B2HttpApiConfig(_raw_api_class=RestrictingSimulator))
    if simulator is not None:
        api.session.raw_api = simulator  # another client of the same simulated B2
    return api


def bucket(name: str, prefix: str = b2_mirror.DEFAULT_PREFIX):
    """(bucket, the account's master credentials) in a new simulated B2."""
    api = _api()
    key_id, key = api.session.raw_api.create_account()
    api.authorize_account("production", key_id, key)
    credentials = b2_mirror.b2_config(key_id, key, name, prefix, "test")
    return api.create_bucket(name, "allPrivate"), credentials


def open_bucket(existing, key_id: str, application_key: str):
    """Bucket `existing`, as a client authorized with another key sees it (an instance with its own key)."""
    api = _api(existing.api.session.raw_api)
    api.authorize_account("production", key_id, application_key)
    return api.get_bucket_by_name(existing.name)
