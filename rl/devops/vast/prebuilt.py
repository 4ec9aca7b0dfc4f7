"""A prebuilt environment: the runtime venv one instance built, kept in the store for the next instance.

    # on the instance, before the build, with the interpreter the build uses (standard library only)
    python3.11 -m rl.devops.vast.prebuilt fetch --library L --lock L/requirements_lock_cuda.txt --cache-root C
    python3.11 -m rl.devops.vast.prebuilt folder ...    # prints the venv's folder (the build makes it there)
    # after a build, with the venv's own python (it has the harness's store clients)
    "$venv/bin/python3" -m rl.devops.vast.prebuilt publish --library L --lock ... --cache-root C

`fetch` exits 0 when the venv is in place (unpacked from the store, or already there), 1 when the
build must make it; it prints one line saying which, and never fails the launch.

**Key.** The venv's own key (`tools/rules/venv_cache.py`, loaded from the checkout the build
uses, so the two never disagree): the interpreter (version, sha256 of the executable and
libpython), the lock's sha256 and the venv's build format, everything its content depends on.
The build hash adds Bazel's version and the sources, neither of which is in the venv, and not the
venv's path: a run built on an unpacked venv records the build hash a local build records.

**Store.** `<prefix>/prebuilt/<lock stem>-<key>/environment.json` (the pointer: the tarball's
name, sha256 and size, the folder it was packed from) and `.../<sha256>.tar`. The tarball is
put before the pointer, each one atomic put of a complete object: two instances that build one
key at once each put a complete tarball of their own, and the pointer (the last put wins) names
one of them with its sha256. A publisher that finds a pointer puts nothing (the first one wins).
A reader extracts the tarball into a staging folder as it downloads and hashes it on the way; one
that does not match its pointer is refused (one warning line, the staging folder deleted) and the
instance builds. Only a verified venv is moved into place and marked complete.

**Relocation.** A venv names its folder in its scripts' shebangs (`bin/pip`, console scripts),
in `bin/activate*` and in `pyvenv.cfg`'s `command`; its python finds its prefix from the
`pyvenv.cfg` beside it, so the interpreter works from any folder. Unpacking rewrites the packed
folder's path to the new one in those files, then checks that `bin/python3` reports the new prefix.

Before the venv exists nothing but the standard library is importable (not even `rl.harness`):
`fetch` reads the store's variables itself (their names are `rl.harness.env_vars`'s, checked by
tests/prebuilt_test.py) and downloads with a signed S3 GET or B2's native download API.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import fcntl
import hashlib
import hmac
import importlib.util
import json
import os
import pathlib
import secrets
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request

LINE = "prebuilt environment:"  # every line this module prints starts so (the log's one line about it)
POINTER = "environment.json"
COMPLETE_MARKER = "COMPLETE"  # venv_cache.py's: a folder without it is a build killed midway
# rl.harness.env_vars's names (tests/prebuilt_test.py checks them): the store an instance was given.
STORE_ENV = "RL_HARNESS_STORE"
STORE_ENDPOINT_ENV = "RL_HARNESS_STORE_ENDPOINT"
KEY_VARIABLES = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    "b2": ("B2_APPLICATION_KEY_ID", "B2_APPLICATION_KEY"),
}
B2_AUTHORIZE_URL = "https://api.backblazeb2.com/b2api/v3/b2_authorize_account"
S3_REGION = "us-east-1"  # the harness's S3 client's (rl/harness/remote/s3_store.py); S3-compatible servers take it
TIMEOUT_S = 60.0
CHUNK_BYTES = 1 << 20


class Unavailable(Exception):
    """The store holds no usable environment for this key; the message says why (never a secret)."""


class NoStore(Unavailable):
    """The instance was given no store it can read (the B2 sink's launch keys may not read): build, publish nothing."""


class Corrupt(Unavailable):
    """The store's tarball does not match its pointer's sha256: refused, and replaced once rebuilt."""


# ---- the key --------------------------------------------------------------------------------------------------


def _venv_cache(library: pathlib.Path):
    spec = importlib.util.spec_from_file_location("venv_cache", library / "tools" / "rules" / "venv_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def environment(
    library: pathlib.Path, lock: pathlib.Path, cache_root: pathlib.Path, python: str
) -> tuple[str, pathlib.Path]:
    """(the store's name of the venv, its folder): the name is `<lock stem>-<full key>`, the folder venv_cache's."""
    probe = subprocess.run(
        [python, str(library / "tools" / "rules" / "probe_interpreter.py"), str(lock)],
        capture_output=True,
        text=True,
        check=True,
        timeout=TIMEOUT_S,
    )
    venv_cache = _venv_cache(library)
    key = venv_cache.venv_key(json.loads(probe.stdout))
    return f"{lock.stem}-{key}", venv_cache.venv_folder(cache_root, lock, key)


# ---- reading the store without a venv --------------------------------------------------------------------------


def _store_from(environ) -> tuple[str, str, str, str, str, str | None] | None:
    """(scheme, bucket, prefix, key id, key, endpoint) of the store in `environ`, or None."""
    url = environ.get(STORE_ENV, "")
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in KEY_VARIABLES or not parts.netloc:
        raise NoStore(f"${STORE_ENV} is not a b2:// or s3:// store URL")
    id_name, key_name = KEY_VARIABLES[parts.scheme]
    if not environ.get(id_name) or not environ.get(key_name):
        raise NoStore(f"${STORE_ENV} names a {parts.scheme} store but ${id_name} or ${key_name} is not set")
    prefix = parts.path.strip("/") or "rl-harness"
    return parts.scheme, parts.netloc, prefix, environ[id_name], environ[key_name], environ.get(STORE_ENDPOINT_ENV)


def _s3_request(endpoint: str | None, bucket: str, key: str, key_id: str, secret: str) -> urllib.request.Request:
    """A GET of `key` signed with AWS Signature Version 4 (path-style, as the harness's client addresses it)."""
    base = urllib.parse.urlsplit(endpoint or "https://s3.amazonaws.com")
    path = "/" + urllib.parse.quote(f"{bucket}/{key}", safe="/-_.~")
    at = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    empty = hashlib.sha256(b"").hexdigest()
    headers = {"host": base.netloc, "x-amz-content-sha256": empty, "x-amz-date": at}
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        ["GET", path, "", *(f"{name}:{headers[name]}" for name in sorted(headers)), "", signed, empty]
    )
    scope = f"{at[:8]}/{S3_REGION}/s3/aws4_request"
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    signing_key = ("AWS4" + secret).encode()
    for part in (at[:8], S3_REGION, "s3", "aws4_request"):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing_key, f"AWS4-HMAC-SHA256\n{at}\n{scope}\n{digest}".encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return urllib.request.Request(f"{base.scheme}://{base.netloc}{path}", headers=headers)


def _b2_request(bucket: str, key: str, key_id: str, secret: str) -> urllib.request.Request:
    """A GET of `key` through B2's native download API, authorized with the key."""
    basic = base64.b64encode(f"{key_id}:{secret}".encode()).decode()
    authorize = urllib.request.Request(B2_AUTHORIZE_URL, headers={"Authorization": f"Basic {basic}"})
    with urllib.request.urlopen(authorize, timeout=TIMEOUT_S) as response:
        account = json.load(response)
    download_url = account["apiInfo"]["storageApi"]["downloadUrl"]
    return urllib.request.Request(
        f"{download_url}/file/{bucket}/{urllib.parse.quote(key, safe='/-_.~')}",
        headers={"Authorization": account["authorizationToken"]},
    )


class StoreReader:
    """Downloads objects of the store named in `environ` with the standard library only."""

    def __init__(self, environ):
        found = _store_from(environ)
        if found is None:
            raise NoStore(f"no store is configured (${STORE_ENV})")
        self.scheme, self.bucket, self.prefix, self._key_id, self._key, self._endpoint = found

    def _redact(self, text: str) -> str:
        for secret in (self._key, self._key_id):
            text = text.replace(secret, "<redacted>")
        return text

    @contextlib.contextmanager
    def open(self, key: str):
        """The response of a GET of `key`; Unavailable when the store has no such object or cannot be read."""
        try:
            if self.scheme == "s3":
                request = _s3_request(self._endpoint, self.bucket, key, self._key_id, self._key)
            else:
                request = _b2_request(self.bucket, key, self._key_id, self._key)
            response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
        except urllib.error.HTTPError as error:
            reason = "none in the store" if error.code == 404 else f"the store answered HTTP {error.code}"
            raise Unavailable(reason) from None
        except (OSError, KeyError, ValueError) as error:
            raise Unavailable(self._redact(f"the store cannot be read ({type(error).__name__}: {error})")) from None
        with response:
            yield response


# ---- pack, unpack, relocate -----------------------------------------------------------------------------------


def pack(folder: pathlib.Path, tarball: pathlib.Path) -> tuple[str, int]:
    """`folder`'s venv as an uncompressed tarball, its completeness marker left out; returns (sha256, size).
    Uncompressed: gunzip alone took half of unpacking the CUDA venv (docs/vast.md), and the files' writing,
    the other half, overlaps the download."""
    with tarfile.open(tarball, "w") as archive:
        for entry in sorted(folder.iterdir()):
            if entry.name != COMPLETE_MARKER:
                archive.add(entry, arcname=entry.name)
    return _sha256(tarball), tarball.stat().st_size


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


class _Hashing:
    """Reads a stream, hashing and counting what passes."""

    def __init__(self, stream):
        self._stream, self.digest, self.size = stream, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        block = self._stream.read(size)
        self.digest.update(block)
        self.size += len(block)
        return block

    def drain(self) -> None:
        for _ in iter(lambda: self.read(CHUNK_BYTES), b""):
            pass


# Tar filters (Python 3.11.4+) keep every file of a tarball inside the folder it is extracted to, so a tarball may be
# extracted as it downloads, before its sha256 is known; without them (Debian's 3.11.2) it is verified first.
STREAMING = hasattr(tarfile, "tar_filter")


def extract(source, staging: pathlib.Path) -> None:
    """The tarball read from the stream `source` into the new folder `staging`."""
    with tarfile.open(fileobj=source, mode="r|", bufsize=CHUNK_BYTES) as archive:
        # "tar", not "data": bin/python links to the interpreter, outside the venv.
        archive.extractall(staging, **({"filter": "tar"} if STREAMING else {}))


def relocate(folder: pathlib.Path, packed_from: str) -> None:
    """Rewrites `packed_from` to `folder` where a venv names its own folder: bin/'s text files, pyvenv.cfg."""
    old, new = packed_from.encode(), str(folder).encode()
    if old == new:
        return
    for path in [*sorted((folder / "bin").iterdir()), folder / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        content = path.read_bytes()
        if old in content and b"\0" not in content[:1024]:
            mode = path.stat().st_mode
            path.write_bytes(content.replace(old, new))
            path.chmod(mode)


def install(staging: pathlib.Path, folder: pathlib.Path, packed_from: str) -> None:
    """The venv extracted to `staging` moved to `folder`, relocated and checked, made complete last (under
    venv_cache's lock, so a build started meanwhile waits, then finds it)."""
    with open(f"{folder}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if (folder / COMPLETE_MARKER).is_file():
            return  # another process made it meanwhile
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        relocate(folder, packed_from)
        prefix = subprocess.run(
            [str(folder / "bin" / "python3"), "-c", "import sys; print(sys.prefix)"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        ).stdout.strip()
        if prefix != str(folder):
            shutil.rmtree(folder, ignore_errors=True)
            raise Unavailable(f"the unpacked venv's python reports prefix {prefix!r}, not {folder}")
        (folder / COMPLETE_MARKER).write_text("unpacked from the store\n")


# ---- the commands -----------------------------------------------------------------------------------------------


def fetch(name: str, folder: pathlib.Path, reader: StoreReader) -> str:
    """Puts the store's venv `name` at `folder`; returns the line to print. Unavailable says why it cannot."""
    if (folder / COMPLETE_MARKER).is_file():
        return f"{LINE} {folder.name} is already built here"
    base = f"{reader.prefix}/prebuilt/{name}"
    with reader.open(f"{base}/{POINTER}") as response:
        pointer = json.load(response)
    started = time.monotonic()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".prebuilt-{secrets.token_hex(4)}"
    download = folder.parent / f".download-{secrets.token_hex(4)}.tar"
    try:
        with reader.open(f"{base}/{pointer['tarball']}") as response:
            received = _Hashing(response)
            unreadable = None
            if STREAMING:
                try:
                    extract(received, staging)
                except (tarfile.TarError, EOFError) as error:
                    unreadable = error  # told apart below: a tarball that is not its pointer's, or one that is
                received.drain()
            else:
                with open(download, "wb") as handle:
                    shutil.copyfileobj(received, handle, CHUNK_BYTES)
        digest = received.digest.hexdigest()
        if digest != pointer["sha256"] or received.size != pointer["size"]:
            raise Corrupt(
                f"WARNING the store's {name} is corrupt (sha256 {digest[:12]}..., {received.size} bytes; its"
                f" pointer says {pointer['sha256'][:12]}..., {pointer['size']} bytes): refused"
            )
        if unreadable is not None:
            raise Unavailable(f"the store's {name} matches its sha256 but is not a tarball ({unreadable})")
        if not STREAMING:
            with open(download, "rb") as handle:
                extract(handle, staging)
        install(staging, folder, pointer["packed_from"])
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        download.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    return f"{LINE} unpacked {name} from the store ({received.size / 1e6:.0f} MB in {seconds:.1f} s); no build"


def publish(name: str, folder: pathlib.Path, store, *, replace: bool = False) -> str:
    """Packs the complete venv at `folder` into `store` (a harness Store) unless it holds `name` (`replace`: a
    corrupt one); returns the line to print."""
    if not (folder / COMPLETE_MARKER).is_file():
        return f"{LINE} {folder} is not a complete venv; nothing published"
    base = f"{store.config.prefix}/prebuilt/{name}"
    if not replace and f"{base}/{POINTER}" in store.list_keys(base):
        return f"{LINE} the store already holds {name}; nothing published"
    started = time.monotonic()
    tarball = folder.parent / f".pack-{secrets.token_hex(4)}.tar"
    try:
        sha256, size = pack(folder, tarball)
        store.put_file(str(tarball), f"{base}/{sha256}.tar", sha256, size)
    finally:
        tarball.unlink(missing_ok=True)
    pointer = {"tarball": f"{sha256}.tar", "sha256": sha256, "size": size, "packed_from": str(folder)}
    store.put_bytes(json.dumps(pointer, sort_keys=True).encode(), f"{base}/{POINTER}")
    return f"{LINE} published {name} to the store ({size / 1e6:.0f} MB in {time.monotonic() - started:.1f} s)"


def _open_store():
    """The configured store through the harness's clients (the venv's python has them; system python has not)."""
    from rl.harness.remote import stores

    config = stores.load()
    if config is None:
        raise NoStore(f"no store is configured (${STORE_ENV})")
    return stores.open_store(config)


# fetch's exit statuses: the venv is in place; the build makes it (publish it then); the build makes it and there
# is no store to publish to; the store's was corrupt (the build makes it, publish over it).
FETCHED, BUILD, BUILD_WITHOUT_STORE, BUILD_AND_REPLACE = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "publish", "folder"))
    parser.add_argument("--library", type=pathlib.Path, required=True, help="the checkout holding tools/rules/")
    parser.add_argument("--lock", type=pathlib.Path, required=True)
    parser.add_argument("--cache-root", type=pathlib.Path, required=True, help="$RL_PYTHON_VENV_CACHE of the build")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the build uses (default: this one)")
    parser.add_argument("--replace", action="store_true", help="publish over a corrupt environment in the store")
    arguments = parser.parse_args(argv)
    otherwise = "building it" if arguments.command == "fetch" else "nothing published"
    try:
        name, folder = environment(arguments.library, arguments.lock, arguments.cache_root.absolute(), arguments.python)
        if arguments.command == "folder":
            print(folder)
        elif arguments.command == "fetch":
            print(fetch(name, folder, StoreReader(os.environ)), flush=True)
        else:
            print(publish(name, folder, _open_store(), replace=arguments.replace), flush=True)
        return FETCHED
    except Corrupt as reason:
        print(f"{LINE} {reason}; {otherwise}", flush=True)
        return BUILD_AND_REPLACE
    except NoStore as reason:
        print(f"{LINE} {reason}; {otherwise}", flush=True)
        return BUILD_WITHOUT_STORE
    except Unavailable as reason:
        print(f"{LINE} {reason}; {otherwise}", flush=True)
    except Exception as error:  # noqa: BLE001 -- the environment only saves time: its faults never end a launch
        print(f"{LINE} {type(error).__name__}: {error}; {otherwise}", flush=True)
    return BUILD


if __name__ == "__main__":
    sys.exit(main())
