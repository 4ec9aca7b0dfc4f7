"""Any S3-compatible server (MinIO, AWS S3, B2's S3 endpoint, Ceph) through `pyarrow.fs.S3FileSystem`.

    store = s3_store.connect(config)   # config.scheme == "s3"; config.endpoint e.g. "http://127.0.0.1:9000"

pyarrow, not boto3: it is already in the lock (through Ray), it streams files in bounded chunks, and
its `S3FileSystem` is what Ray Tune takes as `storage_filesystem`, so a run and a study's Tune storage
use one client. S3 object metadata is not kept by pyarrow, so a file's sha256 lives in the run's
`remote_artifacts.json` (uploaded beside it) rather than on the object.
"""

from __future__ import annotations

import shutil
import urllib.parse

from rl.harness.remote.store import CHUNK_BYTES, Store, StoreConfig, StoreFault, chunks_of_prefix

# pyarrow's messages carry the AWS error's name; these decide what a user has to fix.
_KINDS = (
    ("NETWORK_CONNECTION", "unreachable"),
    ("Could not connect", "unreachable"),
    ("Could not resolve", "unreachable"),
    ("INVALID_ACCESS_KEY_ID", "credentials"),
    ("SIGNATURE_DOES_NOT_MATCH", "credentials"),
    ("InvalidAccessKeyId", "credentials"),
    ("NO_SUCH_BUCKET", "bucket"),
    ("NoSuchBucket", "bucket"),
    ("ACCESS_DENIED", "denied"),
    ("AccessDenied", "denied"),
    ("Path does not exist", "missing"),
)


def file_system(config: StoreConfig, *, timeout_s: float = 10.0):
    """The `pyarrow.fs.S3FileSystem` of `config` (Tune's `storage_filesystem` takes it as it is)."""
    from pyarrow import fs

    options = {
        "access_key": config.key_id,
        "secret_key": config.key,
        "connect_timeout": timeout_s,
        "request_timeout": timeout_s,
        "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=2),
    }
    if config.endpoint:
        endpoint = urllib.parse.urlsplit(config.endpoint)
        options.update(
            endpoint_override=endpoint.netloc or endpoint.path, scheme=endpoint.scheme or "https", region="us-east-1"
        )
    return fs.S3FileSystem(**options)


def connect(config: StoreConfig, **store_options) -> S3Store:
    return S3Store(file_system(config), config, **store_options)


class S3Store(Store):
    def __init__(self, file_system, config: StoreConfig, **store_options):
        super().__init__(config, **store_options)
        self._fs = file_system

    def _path(self, key: str) -> str:
        return f"{self.config.bucket}/{key}"

    def _call(self, operation):
        try:
            return operation()
        except OSError as error:  # pyarrow raises OSError for every S3 fault
            message = self.config.redact(str(error))
            kind = next((kind for marker, kind in _KINDS if marker in message), "other")
            raise StoreFault(kind, message) from None

    def _put_file(self, path: str, key: str, sha256: str, size: int) -> str | None:
        def upload():
            with open(path, "rb") as source, self._fs.open_output_stream(self._path(key), compression=None) as target:
                for chunk in chunks_of_prefix(source, size, path):
                    target.write(chunk)

        self._call(upload)
        return None

    def _put_bytes(self, data: bytes, key: str) -> None:
        def upload():
            with self._fs.open_output_stream(self._path(key), compression=None) as target:
                target.write(data)

        self._call(upload)

    def _get_file(self, key: str, path: str) -> None:
        def download():
            with self._fs.open_input_stream(self._path(key), compression=None) as source, open(path, "wb") as target:
                shutil.copyfileobj(source, target, CHUNK_BYTES)

        self._call(download)

    def _list(self, prefix: str) -> dict[str, int]:
        from pyarrow import fs

        def listing():
            selector = fs.FileSelector(self._path(prefix), recursive=True, allow_not_found=True)
            return {
                info.path.split("/", 1)[1]: info.size
                for info in self._fs.get_file_info(selector)
                if info.type == fs.FileType.File
            }

        return self._call(listing)

    def _delete(self, key: str) -> None:
        self._call(lambda: self._fs.delete_file(self._path(key)))
