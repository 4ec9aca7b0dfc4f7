"""A real S3-compatible server for tests: moto's server mode, in its own process and venv.

    with s3_server.S3Server() as server:          # IAM enforced: a read-write key, a read-only key
        server.endpoint, server.bucket, server.read_write, server.read_only
        server.stop()                             # the store goes away mid-test

The server's python is the test tools' venv (`@rl_python//:test_tools_python.txt`, from
requirements_test_lock.txt), named by $RL_TEST_TOOLS_PYTHON_FILE (the BUILD target sets it).
Keys are made through moto's IAM API in the first requests, which moto lets through unsigned
(INITIAL_NO_AUTH_ACTION_COUNT); every request after them is checked against the key's policy.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

TOOLS_PYTHON_FILE_ENV = "RL_TEST_TOOLS_PYTHON_FILE"
_UNSIGNED_SET_UP_REQUESTS = 6  # two users, each: user, access key, policy
_READ_ONLY = ["s3:GetObject", "s3:ListBucket", "s3:ListAllMyBuckets", "s3:GetBucketLocation"]


def tools_python() -> str:
    """The test tools' python (requirements_test_lock.txt: moto's server, MLflow), named by the file in $RL_TEST_TOOLS_PYTHON_FILE."""
    path = os.environ.get(TOOLS_PYTHON_FILE_ENV)
    if not path:
        raise RuntimeError(
            f"${TOOLS_PYTHON_FILE_ENV} is not set: run this test through Bazel, or set it to a file"
            " naming the python of a venv built from requirements_test_lock.txt"
        )
    with open(path) as handle:
        return handle.read().strip()


def reader(server: S3Server, key: tuple[str, str] | None = None):
    """Another client of `server` (pyarrow's), with `key` (default: the read-only one)."""
    from pyarrow import fs

    key_id, secret = key or server.read_only
    return fs.S3FileSystem(
        access_key=key_id,
        secret_key=secret,
        endpoint_override=f"127.0.0.1:{server.port}",
        scheme="http",
        region="us-east-1",
    )


def exists(file_system, path: str) -> bool:
    from pyarrow import fs

    return file_system.get_file_info(path).type == fs.FileType.File


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    bucket = "rl-runs"

    def __init__(self):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_UNSIGNED_SET_UP_REQUESTS)}
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.pop(name, None)
        self._process = subprocess.Popen(
            [tools_python(), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_until_listening()
        self.read_write = self._user("writer", ["s3:*"])
        self.read_only = self._user("reader", _READ_ONLY)
        self._create_bucket()

    def store_env(self, prefix: str = "lab") -> dict[str, str]:
        """The variables that make this server's bucket, below `prefix`, a run's store, with the read-write key."""
        from rl.harness import env_vars

        key_id, secret = self.read_write
        return {
            env_vars.STORE_ENV: f"s3://{self.bucket}/{prefix}",
            env_vars.STORE_ENDPOINT_ENV: self.endpoint,
            env_vars.S3_KEY_ID_ENV: key_id,
            env_vars.S3_KEY_ENV: secret,
        }

    def _wait_until_listening(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto's server exited with {self._process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"moto's server did not listen on port {self.port} within {timeout_s} s")

    def _iam(self, **parameters) -> str:
        data = urllib.parse.urlencode({"Version": "2010-05-08", **parameters}).encode()
        request = urllib.request.Request(
            self.endpoint + "/",
            data=data,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                # moto routes by the credential scope's service; the signature is not checked for set-up requests
                "Authorization": "AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/iam/aws4_request,"
                " SignedHeaders=host, Signature=0",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode()

    def _user(self, name: str, actions: list[str]) -> tuple[str, str]:
        """(access key id, secret key) of a new IAM user allowed `actions` on every bucket."""
        self._iam(Action="CreateUser", UserName=name)
        created = self._iam(Action="CreateAccessKey", UserName=name)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
        self._iam(Action="PutUserPolicy", UserName=name, PolicyName="runs", PolicyDocument=json.dumps(policy))
        return (
            re.search("<AccessKeyId>(.*?)</", created).group(1),
            re.search("<SecretAccessKey>(.*?)</", created).group(1),
        )

    def _create_bucket(self) -> None:
        from pyarrow import fs

        key_id, key = self.read_write
        fs.S3FileSystem(
            access_key=key_id,
            secret_key=key,
            endpoint_override=f"127.0.0.1:{self.port}",
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        ).create_dir(self.bucket)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> S3Server:
        return self

    def __exit__(self, *_) -> None:
        self.stop()
