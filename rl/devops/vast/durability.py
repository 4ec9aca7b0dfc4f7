"""The durability gate: an instance is destroyed only after its results are verified safe.

    from rl.devops.vast import durability

    spec = durability.SinkSpec(kind="copy", dest="vast_results", remote_out="/workspace/rlh/out")
    # or kind="b2", b2_bucket=durability.b2_credentials().bucket: results copied, artifacts mirrored
    # to B2 by the harness (rl/harness/remote/b2_mirror.py) and verified there
    sink = durability.build_sink(spec, known_hosts_dir=state_dir / "known_hosts.d")   # CopyBack or B2Mirror
    secured = sink.secure(record, instance_row)   # raises DurabilityError: keep the instance
    print(secured.summary)

The instance's bootstrap ends by writing `vast/<run-id>/SHA256SUMS` over every
file under results/ and artifacts/ (see bootstrap.py). Both sinks check
against that list, so "secured" means every file the instance produced is
accounted for:

- `CopyBack` rsyncs the instance's output folder over SSH into
  `dest/<run-id>/` and checks the sha256 of every listed file locally.
- `B2Mirror` gives each launch's instances a B2 key of their own, restricted to the
  launch's prefix (`launch_prefix`), able to list and write but not delete, and
  expiring; this machine's key never leaves it. It copies results/ the same way, then reads the run's
  `results/[smoke/]<run-id>/remote_artifacts.json`, written by the harness's
  upload (`rl.harness.remote.b2_mirror`): it must be complete and name this bucket;
  every file it lists must exist in B2 with the recorded size and sha256 (the
  object's `sha256` file info, or by downloading it when it carries none); and
  every artifact file in SHA256SUMS must be listed with the same sha256.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import re
import subprocess
from collections.abc import Callable, Iterable
from typing import Protocol

from rl.devops.vast import api, bootstrap, redact
from rl.devops.vast.state import Record
from rl.harness import env_vars
from rl.harness.remote import b2_mirror, run_mirror
from rl.harness.remote import store as remote_store
from rl.harness.run import layout, provenance, records

CommandRunner = Callable[[list[str]], subprocess.CompletedProcess]
_SUM_LINE = re.compile(r"^([0-9a-f]{64})  (\S.*)$")


class DurabilityError(redact.DevopsError):
    """Results are not (verifiably) safe: the instance must be kept."""


@dataclasses.dataclass(frozen=True)
class Secured:
    files: int
    bytes: int
    summary: str


class ResultsSink(Protocol):
    """Where results go before an instance may be destroyed."""

    upload_artifacts: bool  # whether the run is started with --upload-artifacts

    def instance_env(self, *, launch_id: str, valid_for_s: int) -> dict[str, str]:
        """Environment variables (secrets included) the instances of launch `launch_id` need for this sink.

        A credential in them expires after `valid_for_s` seconds.
        """

    def secure(self, record: Record, row: dict) -> Secured:
        """Brings back and verifies the results of `record` (instance `row`); raises DurabilityError."""


def run_command(argv: list[str], *, timeout_s: float = 3600.0) -> subprocess.CompletedProcess:
    """Runs `argv` (no shell), capturing text output; the default CommandRunner."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


def parse_checksums(text: str) -> dict[str, str]:
    """{relative path: sha256} from `sha256sum` output; an odd line is an error, not skipped."""
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _SUM_LINE.match(line)
        if not match or match.group(2).startswith("/") or ".." in pathlib.PurePosixPath(match.group(2)).parts:
            raise DurabilityError(f"SHA256SUMS line {number} is not '<sha256>  <relative path>': {line[:120]!r}")
        sums[match.group(2)] = match.group(1)
    return sums


@dataclasses.dataclass
class CopyBack:
    """Copies the instance's output folder to `dest/<run-id>/` with rsync over SSH, then verifies it.

    Host keys are accepted on first use into `known_hosts_dir/instance-<id>`, one
    file per instance: vast.ai hands a host:port on to later instances, so a
    shared file would refuse the next machine's key, or vouch for it as the old one.
    `include_artifacts=False` leaves artifacts/ on the instance (B2Mirror checks them in B2).
    `runner` runs the rsync command (tests pass a fake that copies from a local folder).
    """

    dest: pathlib.Path
    known_hosts_dir: pathlib.Path
    remote_out: str = f"{bootstrap.DEFAULT_WORKDIR}/out"
    include_artifacts: bool = True
    runner: CommandRunner = run_command
    upload_artifacts: bool = False

    def instance_env(self, *, launch_id: str, valid_for_s: int) -> dict[str, str]:
        return {}

    def rsync_command(self, record: Record, row: dict) -> list[str]:
        host, port = api.ssh_endpoint(row)
        ssh = (
            f"ssh -p {port} -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=30 "
            f"-o UserKnownHostsFile={self.known_hosts_file(record)}"
        )
        # The instance is not trusted. --safe-links: a link it made that points out of the copied
        # tree (to ~/.ssh, say) must not land here where following it would read or write outside.
        # -rlt, not -a: files, links and times only, so as root no device node, owner or setuid bit
        # it made arrives here.
        command = ["rsync", "-rlt", "--safe-links", "--partial", "--timeout=300", "-e", ssh]
        if not self.include_artifacts:
            command.append("--exclude=/artifacts/")
        return command + [f"root@{host}:{self.remote_out}/", f"{self.local_dir(record)}/"]

    def known_hosts_file(self, record: Record) -> pathlib.Path:
        return self.known_hosts_dir / f"instance-{record.instance_id}"

    def local_dir(self, record: Record) -> pathlib.Path:
        return self.dest / record.run_id

    def secure(self, record: Record, row: dict) -> Secured:
        local = self.local_dir(record)
        local.mkdir(parents=True, exist_ok=True)
        self.known_hosts_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        command = self.rsync_command(record, row)
        with redact.guarded(f"copy results of {record.label} back"):
            result = self.runner(command)
        if result.returncode != 0:
            raise DurabilityError(
                f"copying results of {record.label} back failed (rsync exit {result.returncode}): "
                f"{redact.truncate((result.stderr or '').strip(), -400)}"
            )
        checked = self.checksums(record)
        if not self.include_artifacts:
            checked = {path: digest for path, digest in checked.items() if not path.startswith("artifacts/")}
        files, size = verify_files(local, checked)
        return Secured(files=files, bytes=size, summary=f"{files} files ({size} bytes) copied to {local}")

    def checksums(self, record: Record) -> dict[str, str]:
        """The instance's SHA256SUMS of `record`, from the local copy."""
        path = self.local_dir(record) / "vast" / record.run_id / "SHA256SUMS"
        try:
            return parse_checksums(path.read_text())
        except FileNotFoundError:
            raise DurabilityError(
                f"{path} is missing: the bootstrap of {record.label} has not finished (no checksum list), "
                "so nothing can be verified"
            ) from None


def verify_files(root: pathlib.Path, sums: dict[str, str]) -> tuple[int, int]:
    """(files, bytes) after checking each file of `sums` under `root`; raises DurabilityError listing the bad."""
    bad, size = [], 0
    for relative, digest in sorted(sums.items()):
        path = root / relative
        if not path.is_file():
            bad.append(f"{relative} missing")
        elif provenance.file_sha256(str(path)) != digest:
            bad.append(f"{relative} sha256 differs")
        else:
            size += path.stat().st_size
    if bad:
        raise DurabilityError(
            f"{len(bad)} of {len(sums)} files under {root} failed verification: "
            + "; ".join(bad[:5])
            + ("; ..." if len(bad) > 5 else "")
        )
    return len(sums), size


class ObjectStore(Protocol):
    """The few questions the B2 check asks (B2Store; tests put b2sdk's RawSimulator behind it)."""

    name: str  # the bucket

    def stat(self, key: str) -> tuple[int, str | None] | None:
        """(size, sha256 from the object's file info or None), or None when there is no such object."""

    def sha256(self, key: str) -> str:
        """The sha256 of the object's content (downloads it)."""

    def launch_credentials(self, *, prefix: str, launch_id: str, valid_for_s: int) -> dict[str, str]:
        """The harness's B2 variables for one launch's instances, with a key of their own (B2Store's)."""


class _HashingWriter:
    def __init__(self):
        self.digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)

    def seekable(self) -> bool:
        return False


def b2_credentials() -> remote_store.StoreConfig:
    """The harness's B2 credentials on this machine (environment or credentials file), registered as secrets."""
    with redact.guarded("read the B2 credentials"):
        credentials = b2_mirror.load_credentials()
    if credentials is None:
        raise redact.DevopsError(
            f"the b2 sink needs the harness's B2 credentials: set ${env_vars.B2_KEY_ID_ENV}, ${env_vars.B2_KEY_ENV} "
            f"and ${env_vars.B2_BUCKET_ENV}, or write {b2_mirror.DEFAULT_CREDENTIALS_FILE} (docs/artifact_storage.md)"
        )
    redact.register_secret(credentials.key_id)
    redact.register_secret(credentials.key)
    return credentials


# What an instance's key may do: find its bucket, list and write files under its launch's prefix.
# Never delete (a compromised instance cannot destroy what other runs uploaded), never read keys.
LAUNCH_KEY_CAPABILITIES = ("listBuckets", "listFiles", "writeFiles")


def launch_prefix(prefix: str, launch_id: str) -> str:
    """Where the runs of one launch upload: `<prefix>/launches/<launch id>`, the only place their key reaches."""
    return f"{prefix.strip('/')}/launches/{launch_id}"


class B2Store:
    """A B2 bucket through b2sdk (`open` authorizes with the harness's credentials).

    Its key stays on this machine: it verifies uploads and makes each launch its own restricted key
    (`launch_credentials`), which is all an instance ever gets.
    """

    def __init__(self, bucket):
        self._bucket = bucket
        self.name = bucket.name

    @classmethod
    def open(cls, credentials: remote_store.StoreConfig) -> B2Store:
        import b2sdk.v2 as b2

        with redact.guarded(f"open B2 bucket {credentials.bucket}"):
            b2_api = b2.B2Api(b2.InMemoryAccountInfo())
            b2_api.authorize_account("production", credentials.key_id, credentials.key)
            return cls(b2_api.get_bucket_by_name(credentials.bucket))

    def stat(self, key: str) -> tuple[int, str | None] | None:
        from b2sdk.v2.exception import FileNotPresent

        with redact.guarded(f"look up b2://{self.name}/{key}"):
            try:
                version = self._bucket.get_file_info_by_name(key)
            except FileNotPresent:
                return None
        return int(version.size), (version.file_info or {}).get("sha256")

    def launch_credentials(self, *, prefix: str, launch_id: str, valid_for_s: int) -> dict[str, str]:
        """The variables an instance's harness uploads with: a new key for `launch_id` alone.

        Restricted to this bucket and to `launch_prefix(prefix, launch_id)/`, with LAUNCH_KEY_CAPABILITIES
        (no delete), expiring after `valid_for_s`; registered for redaction.
        """
        name_prefix = launch_prefix(prefix, launch_id)
        with redact.guarded(
            f"create the B2 key of launch {launch_id} (this machine's key needs the writeKeys capability: docs/vast.md)"
        ):
            key = self._bucket.api.create_key(
                capabilities=list(LAUNCH_KEY_CAPABILITIES),
                key_name=f"rlh-{launch_id}",
                valid_duration_seconds=valid_for_s,
                bucket_id=self._bucket.id_,
                name_prefix=f"{name_prefix}/",
            )
        redact.register_secret(key.application_key)
        return {
            env_vars.B2_KEY_ID_ENV: key.id_,
            env_vars.B2_KEY_ENV: key.application_key,
            env_vars.B2_BUCKET_ENV: self.name,
            env_vars.B2_PREFIX_ENV: name_prefix,
        }

    def sha256(self, key: str) -> str:
        writer = _HashingWriter()
        with redact.guarded(f"download b2://{self.name}/{key}"):
            self._bucket.download_file_by_name(key).save(writer, allow_seeking=False)
        return writer.digest.hexdigest()


def read_remote_artifacts(path: pathlib.Path, bucket: str) -> list[dict]:
    """The files of a complete harness `remote_artifacts.json` in `bucket`; anything else is a DurabilityError."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise DurabilityError(f"cannot read {path} ({redact.describe(error)})") from None
    if document.get("schema_version") != run_mirror.REMOTE_ARTIFACTS_SCHEMA_VERSION:
        raise DurabilityError(
            f"{path} has schema_version {document.get('schema_version')!r}, "
            f"expected {run_mirror.REMOTE_ARTIFACTS_SCHEMA_VERSION}"
        )
    if document.get("status") != "complete":
        raise DurabilityError(
            f"the harness's B2 upload is {document.get('status')!r}, not complete "
            f"({document.get('error')}; not uploaded: {len(document.get('not_uploaded') or [])} files)"
        )
    if document.get("bucket") != bucket:
        raise DurabilityError(f"{path} names bucket {document.get('bucket')!r}, but this machine's is {bucket!r}")
    files = document.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict)
        and isinstance(f.get("key"), str)
        and isinstance(f.get("local"), str)
        and isinstance(f.get("size"), int)
        and isinstance(f.get("sha256"), str)
        for f in files
    ):
        raise DurabilityError(f"{path}: 'files' is not a list of {{key, local, size, sha256}}")
    return files


@dataclasses.dataclass
class B2Mirror:
    """results/ copied back (CopyBack without artifacts), the harness's B2 upload verified (module docstring)."""

    copy: CopyBack
    store: ObjectStore
    prefix: str = remote_store.DEFAULT_PREFIX  # the harness's; each launch uploads below it (`launch_prefix`)
    upload_artifacts: bool = True

    def instance_env(self, *, launch_id: str, valid_for_s: int) -> dict[str, str]:
        return self.store.launch_credentials(prefix=self.prefix, launch_id=launch_id, valid_for_s=valid_for_s)

    def secure(self, record: Record, row: dict) -> Secured:
        copied = self.copy.secure(record, row)
        sums = self.copy.checksums(record)
        manifests = [
            p for p in sums if layout.run_folder_part(p, record.run_id) == ("results", records.REMOTE_ARTIFACTS_FILE)
        ]
        if len(manifests) != 1:
            raise DurabilityError(
                f"the run {record.run_id} left {len(manifests)} {records.REMOTE_ARTIFACTS_FILE} files, expected "
                "one: without it the B2 mirror cannot be verified; was it started with --upload-artifacts?"
            )
        files = read_remote_artifacts(self.copy.local_dir(record) / manifests[0], self.store.name)
        problems = list(self._check_objects(files))
        uploaded = {f["local"]: f["sha256"] for f in files}
        for path, digest in sorted(sums.items()):
            kind, inside = layout.run_folder_part(path, record.run_id) or (None, None)
            if kind == "artifacts" and uploaded.get(f"artifacts/{inside}") != digest:
                problems.append(f"{path} (produced on the instance) is not in B2 with its sha256")
        if problems:
            raise DurabilityError(
                f"B2 mirror of {record.label} failed verification ({len(problems)} problems): "
                + "; ".join(problems[:5])
            )
        size = sum(f["size"] for f in files)
        return Secured(
            files=copied.files + len(files),
            bytes=copied.bytes + size,
            summary=f"{copied.summary}; {len(files)} objects ({size} bytes) verified in b2://{self.store.name}",
        )

    def _check_objects(self, files: Iterable[dict]) -> Iterable[str]:
        for entry in files:
            found = self.store.stat(entry["key"])
            if found is None:
                yield f"{entry['key']} missing in B2"
                continue
            size, digest = found
            if size != entry["size"]:
                yield f"{entry['key']} has {size} bytes in B2, {entry['size']} recorded"
            elif (digest or self.store.sha256(entry["key"])) != entry["sha256"]:
                yield f"{entry['key']} sha256 in B2 differs from the recorded one"


COPY = "copy"
B2 = "b2"
STORE = "store"  # a managed launch: the runs mirror to the harness's store (store_runs.StoreSink)


@dataclasses.dataclass(frozen=True)
class SinkSpec:
    """Which sink secures a run, in words a record can keep (no secrets): see `build_sink`."""

    kind: str
    dest: str
    remote_out: str
    b2_bucket: str | None = None

    def __post_init__(self):
        if self.kind not in (COPY, B2, STORE):
            raise redact.DevopsError(f"sink {self.kind!r}: use {COPY!r}, {B2!r} or {STORE!r}")
        if (self.kind == B2) != bool(self.b2_bucket):
            raise redact.DevopsError("a b2 sink names its bucket, and only a b2 sink does")

    @classmethod
    def of(cls, record: Record) -> SinkSpec:
        return cls(kind=record.sink, dest=record.dest, remote_out=record.remote_out, b2_bucket=record.b2_bucket)


def build_sink(spec: SinkSpec, *, known_hosts_dir: pathlib.Path, runner: CommandRunner = run_command) -> ResultsSink:
    """The real sink for `spec`: CopyBack, or B2Mirror over the harness's bucket opened with this machine's key."""
    if spec.kind == STORE:
        from rl.devops.vast import store_runs  # it reads the harness's store, which the other sinks never open

        return store_runs.StoreSink.configured()
    copy = CopyBack(
        dest=pathlib.Path(spec.dest),
        remote_out=spec.remote_out,
        known_hosts_dir=known_hosts_dir,
        include_artifacts=spec.kind == COPY,
        runner=runner,
    )
    if spec.kind == COPY:
        return copy
    credentials = b2_credentials()
    if credentials.bucket != spec.b2_bucket:
        raise redact.DevopsError(
            f"the run was mirrored to bucket {spec.b2_bucket!r} but the B2 credentials here "
            f"are for {credentials.bucket!r}; use that bucket's credentials"
        )
    return B2Mirror(copy=copy, store=B2Store.open(credentials), prefix=credentials.prefix)
